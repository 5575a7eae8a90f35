package git

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/relay"
)

// maxHops is the number of redirects the relay follows for one request.
const maxHops = 3

// RemoteHeader tells the egress endpoint which remote a request is for: its scheme, host and
// port ("https://github.com"). The path after the egress URL's own path repeats host[:port].
const RemoteHeader = "X-Agentbox-Git-Remote"

// upstream carries the proxy's outgoing request to the remote: it attaches the credential
// for each hop, sends the hop directly or through the egress endpoint, retries an egress 503
// once, and follows redirects that stay within the request's allow entry.
type upstream struct{ rl *Relay }

func (u *upstream) RoundTrip(req *http.Request) (*http.Response, error) {
	st := stateOf(req.Context())
	target := req.URL
	for {
		resp, err := u.send(req, target, st)
		if err != nil {
			return nil, err
		}
		if !isRedirect(resp.StatusCode) || resp.Header.Get("Location") == "" {
			if st.hops > 0 && st.infoRefs && resp.StatusCode == http.StatusOK {
				u.rl.rememberBase(st.sess, st.origBase, &url.URL{Scheme: target.Scheme, Host: target.Host, Path: strings.TrimSuffix(target.Path, st.suffix)})
			}
			return resp, nil
		}
		loc := resp.Header.Get("Location")
		code := resp.StatusCode
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		next, err := u.nextHop(req, st, target, code, loc)
		if err != nil {
			return nil, err
		}
		st.hops++
		st.ev.Hops = st.hops
		st.target = next
		target = next
	}
}

// nextHop checks the redirect of target to loc and returns the URL to go to.
func (u *upstream) nextHop(req *http.Request, st *reqState, target *url.URL, code int, loc string) (*url.URL, error) {
	refuse := func(format string, args ...any) error {
		return &refusal{http.StatusBadGateway, api.CodeGitRedirectRefused, fmt.Sprintf(format, args...)}
	}
	if st.hops >= maxHops {
		return nil, refuse("%s redirected the request more than %d times; the relay follows at most %d redirects", target.Host, maxHops, maxHops)
	}
	next, err := target.Parse(loc)
	if err != nil {
		return nil, refuse("%s redirected to an invalid URL: %v", target.Host, err)
	}
	if req.Method != http.MethodGet && code != http.StatusTemporaryRedirect && code != http.StatusPermanentRedirect {
		return nil, refuse("%s answered a %s with HTTP %d, which would turn it into a GET", target.Host, req.Method, code)
	}
	if st.hasBody && !st.replay {
		return nil, refuse("%s redirected a request whose body was streamed and cannot be sent again", target.Host)
	}
	shown := next.Redacted()
	if next.User != nil || (next.Scheme != "http" && next.Scheme != "https") {
		return nil, refuse("%s redirected to %s, which is not an http(s) URL without credentials", target.Host, shown)
	}
	host, port, err := splitHostPort(next.Host)
	if err != nil {
		return nil, refuse("%s redirected to %s: %v", target.Host, shown, err)
	}
	repo, ok := strings.CutSuffix(strings.TrimPrefix(next.Path, "/"), st.suffix)
	elems, err := splitRepo(repo)
	if !ok || err != nil {
		return nil, refuse("%s redirected to %s, which is not the %s endpoint of a repository", target.Host, shown, strings.TrimPrefix(st.suffix, "/"))
	}
	if !st.entry.matches(next.Scheme, host, port, elems) {
		return nil, refuse("%s redirected to %s, which is outside the git.allow entry %q that admitted the request (every hop must stay within it)", target.Host, shown, st.entry.raw)
	}
	if st.push != nil && !st.push.matches(next.Scheme, host, port, elems) {
		return nil, refuse("%s redirected a push to %s, which is outside the git.pushAllow entry %q", target.Host, shown, st.push.raw)
	}
	out := &url.URL{Scheme: next.Scheme, Host: joinHostPort(host, portOr(port, next.Scheme), next.Scheme), Path: next.Path}
	out.RawQuery = st.query
	return out, nil
}

// send makes one request for target, through the egress endpoint when there is one, and
// retries it once when the egress endpoint answers 503 and the body can be sent again.
func (u *upstream) send(req *http.Request, target *url.URL, st *reqState) (*http.Response, error) {
	pol := u.rl.pol
	for attempt := 0; ; attempt++ {
		out := req.Clone(req.Context())
		if st.replay {
			// A streamed body is sent once only: RoundTrip and this loop go on to another
			// attempt only when the body was kept.
			out.Body = st.replayBody()
		}
		if pol.egress != nil {
			e := *pol.egress
			e.Path = pol.egress.Path + "/" + target.Host + target.Path
			e.RawPath = ""
			e.RawQuery = target.RawQuery
			out.URL = &e
			out.Header.Set(RemoteHeader, target.Scheme+"://"+target.Host)
		} else {
			t := *target
			out.URL = &t
		}
		out.Host = ""
		// The credential of the hop's own location: after a redirect it may be another one.
		out.Header.Del("Authorization")
		out.Header.Del("Proxy-Authorization")
		st.cred = nil
		if c := pol.credentialFor(target.Scheme, hostOf(target), portOfURL(target), repoElems(target, st.suffix)); c != nil {
			secret, err := c.src.Get(req.Context())
			if err != nil {
				detail := err.Error()
				var ce *relay.CredentialError
				if errors.As(err, &ce) {
					detail = ce.Detail
				}
				return nil, &refusal{http.StatusForbidden, api.CodeGitCredentialMissing, detail +
					"; fix it on the host (the box holds no credential and needs no change)"}
			}
			out.SetBasicAuth(c.cred.Username, secret)
			st.cred = c
		}
		resp, err := u.rl.base.RoundTrip(out)
		if err != nil {
			return nil, err
		}
		if pol.egress != nil && resp.StatusCode == http.StatusServiceUnavailable && attempt == 0 && (!st.hasBody || st.replay) {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			continue
		}
		return resp, nil
	}
}

func hostOf(u *url.URL) string {
	h, _, _ := splitHostPort(u.Host)
	return h
}

func portOfURL(u *url.URL) string {
	_, p, _ := splitHostPort(u.Host)
	return p
}

func repoElems(u *url.URL, suffix string) []string {
	repo := strings.TrimSuffix(strings.TrimPrefix(u.Path, "/"), suffix)
	return strings.Split(repo, "/")
}
