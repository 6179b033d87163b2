package server

import (
	"bytes"
	"io"
	"net/http"

	"github.com/aot-loop/aot/internal/graphview"
)

// graph is the loop's work graph, laid out: JSON for scripts, or the same
// picture aot graph draws.
func (s *Server) graph(w http.ResponseWriter, r *http.Request, l *loop) {
	st, err := l.read()
	if err != nil {
		stateError(w, err)
		return
	}
	g := graphview.Build(st, graphview.Options{})
	format := r.URL.Query().Get("format")
	var render func(io.Writer, *graphview.Graph) error
	ctype := "text/plain; charset=utf-8"
	switch format {
	case "", "json":
		writeJSON(w, 200, g)
		return
	case "svg":
		render, ctype = graphview.SVG, "image/svg+xml"
	case "mermaid":
		render = graphview.Mermaid
	case "dot":
		render = graphview.DOT
	default:
		writeError(w, http.StatusBadRequest, "format %q: choose json, svg, mermaid or dot", format)
		return
	}
	var buf bytes.Buffer
	if err := render(&buf, g); err != nil {
		writeError(w, http.StatusInternalServerError, "%v", err)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(buf.Bytes())
}
