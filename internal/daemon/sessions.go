package daemon

import (
	"errors"
	"net/http"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay/session"
)

func sessionView(r session.Record) api.Session {
	return api.Session{ID: r.ID, ClientID: r.ClientID, LaunchID: r.LaunchID, Kind: string(r.Kind), State: string(r.State),
		Created: r.Created, LastUsed: r.LastUsed}
}

func (d *Daemon) serveSessions(w http.ResponseWriter, r *http.Request) error {
	out := []api.Session{}
	for _, rec := range d.sessions.List() {
		out = append(out, sessionView(rec))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// serveCreateSession creates a session by hand: its pairing is answered once and never again.
// Such a session is used on the relay's host loopback listener.
func (d *Daemon) serveCreateSession(w http.ResponseWriter, r *http.Request) error {
	var req api.SessionRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.ClientID == "" {
		return &api.Error{Code: api.CodeBadRequest, Message: "clientId is required", Hint: "name the tool that will use the session, e.g. --client my-script"}
	}
	addr, err := d.relay.sharedListener(d.currentConfig())
	if err != nil {
		return err
	}
	s, pairing, err := d.sessions.Create(r.Context(), session.Spec{Kind: session.KindManual, ClientID: req.ClientID})
	if err != nil {
		switch {
		case errors.Is(err, session.ErrTooManySessions):
			return &api.Error{Code: api.CodeTooManySessions, Message: err.Error(), Hint: "revoke sessions (agentbox session list) or raise sessions.max"}
		case errors.Is(err, session.ErrClientNotAllowed):
			return &api.Error{Code: api.CodeForbidden, Message: err.Error(), Hint: "sessions.allowedClients in the system policy does not list " + req.ClientID}
		}
		return err
	}
	d.log.Info("session created", "session", s.ID(), "client", req.ClientID)
	writeJSON(w, http.StatusCreated, api.SessionCreated{Session: sessionView(s.Record()), Pairing: pairing.Reveal(), RelayURL: "http://" + addr})
	return nil
}

func (d *Daemon) serveRevokeSession(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := api.CheckSessionID(id); err != nil {
		return err
	}
	if err := d.sessions.Revoke(r.Context(), id); err != nil {
		if errors.Is(err, session.ErrNotFound) {
			return &api.Error{Code: api.CodeNotFound, Message: "no live session " + id, Hint: "see `agentbox session list`"}
		}
		return err
	}
	d.log.Info("session revoked", "session", id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// serveRevokeLaunch revokes a launch's session: its next relay request gets pairing_invalid
// and its requests in flight are cancelled. The box keeps running.
func (d *Daemon) serveRevokeLaunch(w http.ResponseWriter, r *http.Request) error {
	rec, _, err := d.find(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	s := d.relay.session(rec.ID)
	if s == nil {
		return &api.Error{Code: api.CodeNotFound, Message: "launch " + rec.ID + " has no live session"}
	}
	if err := d.sessions.Revoke(r.Context(), s.ID()); err != nil && !errors.Is(err, session.ErrNotFound) {
		return err
	}
	d.log.Info("launch session revoked", "launch", rec.ID, "session", s.ID())
	writeJSON(w, http.StatusOK, sessionView(s.Record()))
	return nil
}
