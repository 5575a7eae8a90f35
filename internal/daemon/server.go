package daemon

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
)

// perm is the permission a route needs.
type perm int

const (
	permRead perm = iota
	permWrite
)

// permKey is the context key of the permission granted to a connection when it was accepted.
type permKey struct{}

type route struct {
	method  string
	pattern string // net/http ServeMux pattern path
	perm    perm
	handler func(w http.ResponseWriter, r *http.Request) error
}

// handler builds the local API: a route table filled by registration, every request checked
// for browser origins and a foreign Host before its handler runs.
func (d *Daemon) handler() http.Handler {
	routes := []route{
		{"GET", "/v0/info", permRead, d.serveInfo},
		{"GET", "/v0/readiness", permRead, d.serveReadiness},
		{"GET", "/v0/config", permRead, d.serveConfig},
		{"GET", "/v0/launches", permRead, d.serveLaunches},
		{"POST", "/v0/launches", permWrite, d.serveLaunch},
		{"POST", api.RoutePrune, permWrite, d.servePrune},
		{"GET", "/v0/launches/{id}", permRead, d.serveGetLaunch},
		{"GET", "/v0/launches/{id}/console", permWrite, d.serveConsole},
		{"POST", "/v0/launches/{id}/stop", permWrite, d.serveStop},
		{"POST", "/v0/launches/{id}/revoke", permWrite, d.serveRevokeLaunch},
		{"GET", "/v0/launches/{id}/changes", permRead, d.serveChanges},
		{"POST", "/v0/launches/{id}/apply", permWrite, d.serveApply},
		{"GET", "/v0/sessions", permRead, d.serveSessions},
		{"POST", "/v0/sessions", permWrite, d.serveCreateSession},
		{"DELETE", "/v0/sessions/{id}", permWrite, d.serveRevokeSession},
		{"DELETE", "/v0/sessions/{$}", permWrite, d.serveRevokeSession}, // an empty id: refused by its check, naming it
		{"GET", api.RouteViolations, permRead, d.serveViolations},
		{"POST", api.RouteViolationsScan, permWrite, d.serveScanViolations},
	}
	mux := http.NewServeMux()
	for _, rt := range routes {
		rt := rt
		mux.HandleFunc(rt.method+" "+rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			if err := checkRequest(r, rt.perm); err != nil {
				writeError(w, err)
				return
			}
			if err := rt.handler(w, r); err != nil {
				d.log.Info("api request failed", "method", r.Method, "path", r.URL.Path, "err", err)
				writeError(w, err)
			}
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &api.Error{Code: api.CodeNotFound, Message: "no such route: " + r.Method + " " + r.URL.Path})
	})
	return mux
}

// checkRequest refuses what a browser or a confused proxy could send: any Origin or Referer,
// and a Host other than the local names. Every peer that got this far is the daemon's own uid
// outside any box (checked at accept), which holds both read and write permission.
func checkRequest(r *http.Request, p perm) error {
	if r.Header.Get("Origin") != "" || r.Header.Get("Referer") != "" {
		return &api.Error{Code: api.CodeForbidden, Message: "requests with Origin or Referer are refused"}
	}
	host := r.Host
	if h, _, ok := strings.Cut(host, ":"); ok {
		host = h
	}
	if host != "agentbox" && host != "localhost" {
		return &api.Error{Code: api.CodeForbidden, Message: "foreign Host header refused: " + r.Host}
	}
	if granted, _ := r.Context().Value(permKey{}).(perm); granted < p {
		return &api.Error{Code: api.CodeForbidden, Message: "this connection may not change anything"}
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		slog.Debug("write answer", "err", err)
	}
}

func writeError(w http.ResponseWriter, err error) {
	var ae *api.Error
	if !errors.As(err, &ae) {
		ae = &api.Error{Code: api.CodeInternal, Message: err.Error()}
	}
	writeJSON(w, api.Status(ae.Code), api.ErrorBody{Error: ae})
}

func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 4<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return &api.Error{Code: api.CodeBadRequest, Message: "request body: " + err.Error()}
	}
	return nil
}
