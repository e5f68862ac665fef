package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
)

// writePlot draws the scaling figure: joiner records/s by process count
// (with the naive baseline) per data set size, and restore time by process
// count. Only the standard library: a 3x5 pixel font is built in.
func writePlot(path string, rep *report) error {
	const W, H = 960, 440
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	fill(img, img.Rect, color.RGBA{255, 255, 255, 255})
	black := color.RGBA{30, 30, 30, 255}
	grey := color.RGBA{200, 200, 200, 255}
	naiveC := color.RGBA{150, 150, 150, 255}
	palette := []color.RGBA{{66, 133, 244, 255}, {219, 68, 55, 255}, {15, 157, 88, 255}, {244, 160, 0, 255}}

	// Left panel: records/s.
	lx0, lx1, y0, y1 := 90, 450, 60, 380
	maxRate := 1.0
	for _, s := range rep.Sizes {
		for _, j := range s.Joiners {
			maxRate = math.Max(maxRate, j.RecordsPerSec)
		}
		if s.Naive != nil {
			maxRate = math.Max(maxRate, s.Naive.RecordsPerSec)
		}
	}
	top := niceCeil(maxRate)
	text(img, lx0-60, 20, "RECORDS/S, TOPICS TO COMMITTED FINDINGS", black)
	axes(img, lx0, lx1, y0, y1, black, grey, top, func(v float64) string { return shortNum(v) })
	groups := len(rep.Sizes)
	if groups > 0 {
		gw := (lx1 - lx0) / groups
		for gi, s := range rep.Sizes {
			bars := []struct {
				label string
				v     float64
				c     color.RGBA
			}{}
			if s.Naive != nil {
				bars = append(bars, struct {
					label string
					v     float64
					c     color.RGBA
				}{"N", s.Naive.RecordsPerSec, naiveC})
			}
			for i, j := range s.Joiners {
				bars = append(bars, struct {
					label string
					v     float64
					c     color.RGBA
				}{fmt.Sprint(j.Processes), j.RecordsPerSec, palette[i%len(palette)]})
			}
			if len(bars) == 0 {
				continue
			}
			bw := (gw - 20) / len(bars)
			for bi, b := range bars {
				x := lx0 + gi*gw + 10 + bi*bw
				h := int(float64(y1-y0) * b.v / top)
				fill(img, image.Rect(x+2, y1-h, x+bw-2, y1), b.c)
				text(img, x+bw/2-3, y1+8, b.label, black)
				text(img, x+2, y1-h-14, shortNum(b.v), black)
			}
			text(img, lx0+gi*gw+gw/2-20, y1+26, s.Name+" EVENTS", black)
		}
	}
	text(img, lx0-60, y1+46, "N = NAIVE BASELINE, 1 2 4 = JOINER PROCESSES", black)

	// Right panel: restore time by joiner count.
	rx0, rx1 := 590, 930
	maxT := 1.0
	for _, s := range rep.Sizes {
		for _, r := range s.Restores {
			maxT = math.Max(maxT, r.Seconds)
		}
	}
	topT := niceCeil(maxT)
	text(img, rx0-60, 20, "RESTORE: START TO SERVING, SECONDS", black)
	axes(img, rx0, rx1, y0, y1, black, grey, topT, func(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", v), ".0") })
	xs := []int{1, 2, 4}
	xpos := func(n int) int {
		return rx0 + 30 + int(math.Log2(float64(n))/2*float64(rx1-rx0-60))
	}
	for _, n := range xs {
		text(img, xpos(n)-3, y1+8, fmt.Sprint(n), black)
	}
	text(img, rx0+100, y1+26, "JOINER PROCESSES", black)
	for si, s := range rep.Sizes {
		c := palette[si%len(palette)]
		var px, py int
		for i, r := range s.Restores {
			x := xpos(r.Processes)
			y := y1 - int(float64(y1-y0)*r.Seconds/topT)
			fill(img, image.Rect(x-4, y-4, x+5, y+5), c)
			if i > 0 {
				line(img, px, py, x, y, c)
			}
			px, py = x, y
		}
		text(img, rx0+10, y0+10+si*16, s.Name+" EVENTS", c)
	}

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func axes(img *image.RGBA, x0, x1, y0, y1 int, c, grid color.RGBA, top float64, label func(float64) string) {
	for i := 0; i <= 4; i++ {
		y := y1 - (y1-y0)*i/4
		fill(img, image.Rect(x0, y, x1, y+1), grid)
		l := label(top * float64(i) / 4)
		text(img, x0-8-len(l)*8, y-5, l, c)
	}
	fill(img, image.Rect(x0, y0, x0+1, y1+1), c)
	fill(img, image.Rect(x0, y1, x1, y1+1), c)
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 4, 5, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func shortNum(v float64) string {
	switch {
	case v >= 1e6:
		return strings.TrimSuffix(fmt.Sprintf("%.2f", v/1e6), "0") + "M"
	case v >= 1e3:
		return fmt.Sprintf("%.0fK", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func line(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		x := x0 + (x1-x0)*i/n
		y := y0 + (y1-y0)*i/n
		fill(img, image.Rect(x-1, y-1, x+1, y+1), c)
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// font3x5 holds each glyph as 5 rows of 3 pixels, top row first.
var font3x5 = map[rune]string{
	'0': "111101101101111", '1': "010110010010111", '2': "111001111100111", '3': "111001111001111",
	'4': "101101111001001", '5': "111100111001111", '6': "111100111101111", '7': "111001001001001",
	'8': "111101111101111", '9': "111101111001111", 'A': "010101111101101", 'B': "110101110101110",
	'C': "011100100100011", 'D': "110101101101110", 'E': "111100110100111", 'F': "111100110100100",
	'G': "011100101101011", 'H': "101101111101101", 'I': "111010010010111", 'J': "001001001101010",
	'K': "101101110101101", 'L': "100100100100111", 'M': "101111111101101", 'N': "110101101101101",
	'O': "010101101101010", 'P': "110101110100100", 'Q': "010101101110011", 'R': "110101110101101",
	'S': "011100010001110", 'T': "111010010010010", 'U': "101101101101111", 'V': "101101101101010",
	'W': "101101111111101", 'X': "101101010101101", 'Y': "101101010010010", 'Z': "111001010100111",
	'.': "000000000000010", ',': "000000000010100", '/': "001001010100100", '(': "010100100100010",
	')': "010001001001010", ':': "000010000010000", '-': "000000111000000", '%': "101001010100101",
	'=': "000111000111000", ' ': "000000000000000",
}

// text draws s at (x, y) in the 3x5 font scaled by 2 (8 px per character).
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	const scale = 2
	for _, r := range strings.ToUpper(s) {
		g, ok := font3x5[r]
		if !ok {
			g = font3x5[' ']
		}
		for row := 0; row < 5; row++ {
			for col := 0; col < 3; col++ {
				if g[row*3+col] == '1' {
					fill(img, image.Rect(x+col*scale, y+row*scale, x+(col+1)*scale, y+(row+1)*scale), c)
				}
			}
		}
		x += 4 * scale
	}
}
