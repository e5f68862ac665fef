// Package web is the query API's web UI: static HTML, JavaScript and CSS
// over the JSON API, with no build step and no external CDN, embedded in
// the binary that serves it.
package web

import (
	"embed"
	"net/http"
)

//go:embed index.html app.js style.css
var files embed.FS

// Handler serves the UI under /ui/.
func Handler() http.Handler {
	serve := http.StripPrefix("/ui/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A deployed binary changes its UI with it; never serve a stale one.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'")
		serve.ServeHTTP(w, r)
	})
}
