package fleet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"

	json "github.com/segmentio/encoding/json"
)

// WriteNDJSON writes src's events to w as NDJSON, one event a line in
// emission order, and returns how many it wrote. progress, when set, is
// called with the running count every 100,000 events, where ctx is
// checked too.
func WriteNDJSON(ctx context.Context, w io.Writer, src Source, progress func(events int)) (int, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	n := 0
	err := src.Emit(func(e *Event) error {
		if n%100_000 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			if n > 0 && progress != nil {
				progress(n)
			}
		}
		n++
		bw.Write(e.Line)
		return bw.WriteByte('\n')
	})
	if err != nil {
		return n, fmt.Errorf("write events: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return n, fmt.Errorf("write events: %w", err)
	}
	return n, nil
}

// WriteNDJSONFile is WriteNDJSON to the file at path, created or
// truncated; "" or "-" is standard output.
func WriteNDJSONFile(ctx context.Context, path string, src Source, progress func(events int)) (int, error) {
	if path == "" || path == "-" {
		return WriteNDJSON(ctx, os.Stdout, src, progress)
	}
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("write events: %w", err)
	}
	n, err := WriteNDJSON(ctx, f, src, progress)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("write events: %w", cerr)
	}
	return n, err
}

// WriteTruthFile writes g's ground truth as indented JSON to path, with
// the config it belongs to under "config" beside the truth's own fields.
func WriteTruthFile(path string, g *Generator) error {
	doc := struct {
		Config Config `json:"config"`
		*Truth
	}{g.Config(), g.Truth()}
	raw, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encode truth: %w", err)
	}
	if err := os.WriteFile(path, append(raw, '\n'), 0o644); err != nil {
		return fmt.Errorf("write truth: %w", err)
	}
	return nil
}

// WritePriceBookFile writes the price book the generator assumes
// (DefaultPriceBook) as JSON to path, for the rater to load.
func WritePriceBookFile(path string) error {
	raw, err := DefaultPriceBook().JSON()
	if err != nil {
		return fmt.Errorf("encode price book: %w", err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return fmt.Errorf("write price book: %w", err)
	}
	return nil
}
