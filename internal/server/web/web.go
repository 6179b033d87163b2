// Package web is the dashboard aot serve shows at /: plain HTML, CSS and
// JavaScript with no build step, embedded so the binary works offline and
// the page loads nothing from anywhere but the server (it runs under
// Content-Security-Policy: default-src 'self').
package web

import (
	"embed"
	"io/fs"
)

//go:embed index.html *.js app.css icon.svg
var files embed.FS

// FS holds the dashboard's files at its root; index.html is the page, which
// routes on the address's hash (#/loops/ID).
var FS fs.FS = files
