package export

import (
	"reflect"
	"strings"
	"time"
)

// columnsOf returns the exported columns of T named by the JSON names of
// its fields, in the order given, so that an export and the JSON answer
// of a listing name and type a value alike: a string is a String column,
// an unsigned integer a Uint64 one, an int64 an Int64 one, a float64 a
// Float64 one, a time.Time or *time.Time (nil: null) a UTC timestamp in
// seconds. A name T lacks, or a field of another type, is a bug.
func columnsOf[T any](names ...string) []Column[T] {
	t := reflect.TypeFor[T]()
	fields := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if old, ok := fields[name]; name == "" || name == "-" || ok && len(old.Index) <= len(f.Index) {
			continue
		}
		fields[name] = f
	}
	cols := make([]Column[T], len(names))
	for i, name := range names {
		f, ok := fields[name]
		if !ok {
			panic("BUG: export: " + t.Name() + " has no field " + name)
		}
		cols[i] = columnOf[T](name, f)
	}
	return cols
}

// columnOf is the column name of T's field f.
func columnOf[T any](name string, f reflect.StructField) Column[T] {
	value := func(r *T) reflect.Value { return reflect.ValueOf(r).Elem().FieldByIndex(f.Index) }
	switch f.Type {
	case reflect.TypeFor[time.Time]():
		return timeCol(name, func(r *T) *time.Time { return value(r).Addr().Interface().(*time.Time) })
	case reflect.TypeFor[*time.Time]():
		return timeCol(name, func(r *T) *time.Time { return value(r).Interface().(*time.Time) })
	}
	switch f.Type.Kind() {
	case reflect.String:
		return strCol(name, func(r *T) string { return value(r).String() })
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return u64Col(name, func(r *T) uint64 { return value(r).Uint() })
	case reflect.Int64:
		return i64Col(name, func(r *T) int64 { return value(r).Int() })
	case reflect.Float64:
		return f64Col(name, func(r *T) float64 { return value(r).Float() })
	}
	panic("BUG: export: field " + name + " of " + reflect.TypeFor[T]().Name() + " is a " + f.Type.String())
}
