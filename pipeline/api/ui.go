package api

import (
	"embed"
	"io/fs"
	"net/http"
)

// The web UI is static HTML, JavaScript and CSS over the JSON API: no
// build step, no external CDN, embedded in the binary.
//
//go:embed web
var webFS embed.FS

// uiHandler serves the embedded UI under /ui/.
func uiHandler() http.Handler {
	sub, err := fs.Sub(webFS, "web")
	if err != nil {
		panic("BUG: embedded web folder: " + err.Error())
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A deployed binary changes its UI with it; never serve a stale one.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
		files.ServeHTTP(w, r)
	})
}
