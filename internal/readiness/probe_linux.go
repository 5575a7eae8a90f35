package readiness

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/console"
	"github.com/agentbox/agentbox/internal/engine"
	"github.com/agentbox/agentbox/internal/launch"
	"github.com/agentbox/agentbox/internal/linux/ns"
	"github.com/agentbox/agentbox/internal/linux/proc"
	"github.com/agentbox/agentbox/internal/plan"
	"github.com/agentbox/agentbox/internal/safesocket"
	"github.com/agentbox/agentbox/internal/shim"
)

// Paths in the runtime directory.
const (
	// LockFile serializes probes of every process of the user.
	LockFile = "readiness.lock"
	// ProbesDir holds one launch directory per running (or abandoned) probe.
	ProbesDir = "readiness"
	// CanaryName is the file the prober writes in ~/.ssh.
	CanaryName = ".agentbox-readiness-canary"
)

// Files of a probe's launch directory beyond the shim's, for reclaiming it.
const (
	proberFile = "prober.json" // the prober's pid and start time
	shimFile   = "probe-shim.json"
	boxFile    = "probe-box.json" // the box's PID 1 (host pid, start time) and pid namespace
	hostSock   = "host.sock"      // the prober's host pathname socket
)

// Names of the probe's own stages (beside internal/launch's standard ones).
const (
	stageChallenge = "challenge" // the host endpoints, the canary, the challenge file
	stagePlan      = "plan"
	stageAttach    = "attach" // the console client
)

// settleWait bounds how long a probe waits, after killing what is left, for the box's pid
// namespace to empty.
const settleWait = 5 * time.Second

type procRef struct {
	Pid   int    `json:"pid"`
	Start uint64 `json:"start"`
	PidNS uint64 `json:"pidNS,omitempty"`
}

// Probe runs one probe: it takes the probe lock (waiting while another process probes),
// reclaims what earlier probes left behind, starts a throwaway box the way the daemon starts a
// launch (plan.Build, the engine's request, a shim, an attached console) and checks the
// attestation of the program in it. It never leaves anything running: a box it cannot prove
// settled makes the probe fail (ReasonUnsettled), and its directory is reclaimed by the next
// probe. ctx bounds the whole probe (ReasonProbeTimeout).
func Probe(ctx context.Context, o ProbeOptions) *Result {
	res := &Result{Engine: o.Engine, Started: time.Now(), Kernel: HostFacts()}
	res.Err = probe(ctx, o, res)
	res.Duration = time.Since(res.Started)
	return res
}

func probe(ctx context.Context, o ProbeOptions, res *Result) *Error {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := classifyHost(o.Engine, res.Kernel); err != nil {
		return err
	}
	eng, err := engine.Get(o.Engine)
	if err != nil {
		return failf(ReasonEngineMissing, "%v", err)
	}
	if o.RuntimeDir == "" {
		return failf(ReasonRuntimeDirRefused, "no runtime directory")
	}
	lock, lerr := lockProbe(ctx, filepath.Join(o.RuntimeDir, LockFile))
	if lerr != nil {
		return lerr
	}
	defer lock.Unlock()

	exe := o.Executable
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return failf(ReasonBoxSetupFailed, "agentbox executable: %v", err)
		}
	}
	if exe, err = filepath.EvalSymlinks(exe); err != nil {
		return failf(ReasonBoxSetupFailed, "agentbox executable: %v", err)
	}
	home := o.Home
	if home == "" {
		if home, err = os.UserHomeDir(); err != nil {
			return failf(ReasonBoxSetupFailed, "home directory: %v", err)
		}
	}
	root := filepath.Join(o.RuntimeDir, ProbesDir)
	if err := os.Mkdir(root, safesocket.DirMode); err != nil && !errors.Is(err, os.ErrExist) {
		return failf(ReasonRuntimeDirRefused, "%v", err)
	}
	if err := safesocket.CheckOwner(root, true); err != nil {
		return failf(ReasonRuntimeDirRefused, "%v", err)
	}
	if err := Reclaim(o.RuntimeDir, home, log); err != nil {
		return failf(ReasonUnsettled, "an earlier probe's box could not be reclaimed: %v", err)
	}

	p := &prober{log: log, home: home, eng: eng, exe: exe, o: o}
	defer p.cleanup()
	return p.run(ctx, root, res)
}

// lockProbe takes the probe lock, polling so that ctx can end the wait. A lock file or
// directory of another uid (or open to others) fails closed.
func lockProbe(ctx context.Context, path string) (*safesocket.FileLock, *Error) {
	for {
		l, err := safesocket.TryLock(path)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, safesocket.ErrLocked) {
			return nil, failf(ReasonRuntimeDirRefused, "probe lock: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil, failf(ReasonProbeTimeout, "waiting for another process's probe (%s): %v", path, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

type prober struct {
	log  *slog.Logger
	home string
	eng  engine.Engine
	exe  string
	o    ProbeOptions

	l         *launch.Launch
	stages    launch.Run // the probe launch's stages; cleanup rolls them back
	dir       string
	canary    string
	madeSSH   bool
	listeners []net.Listener
	hits      atomic.Int32
	foreign   atomic.Int32 // connections from other users, not counted as hits
	shimPid   int
	watcher   *shim.Watcher
	stdinW    *os.File
	pidNS     uint64
	pin       *pinnedNS // holds the box's pid namespace (and so its inode number) alive
	init      procRef   // the box's PID 1
	finished  bool      // the shim reported the launch's end
	unsettled bool      // stopping the box did not prove it gone
	final     *shim.Status
}

func (p *prober) run(ctx context.Context, root string, res *Result) *Error {
	// 16 hex digits keep the probe's socket paths well within the 107 bytes of sun_path.
	id := randomHex(8)
	nonce := randomHex(16)
	// The probe's launch goes through the launch pipeline's stages as the daemon's does; its
	// rollback (cleanup, always: a probe leaves nothing) undoes them, the last first.
	p.l = &launch.Launch{Dir: filepath.Join(root, id), Log: p.log, KeepDir: p.keepDir}
	p.dir = p.l.Dir
	do := func(s launch.Stage) *Error {
		err := p.stages.Do(ctx, s)
		if err == nil {
			return nil
		}
		var re *Error
		if errors.As(err, &re) {
			return re
		}
		return failf(ReasonBoxSetupFailed, "%v", err)
	}
	if err := do(p.l.Layout().MapErr(func(err error) error {
		if de := (*launch.DirError)(nil); errors.As(err, &de) {
			return failf(ReasonRuntimeDirRefused, "probe directory: %v", de.Err)
		}
		return err
	})); err != nil {
		return err
	}
	ws := filepath.Join(p.dir, "ws")
	var ch *Challenge
	if err := do(launch.Stage{Name: stageChallenge,
		Do: func(context.Context) error {
			if err := writeRef(filepath.Join(p.dir, proberFile), os.Getpid(), 0); err != nil {
				return err
			}
			if err := os.Mkdir(ws, safesocket.DirMode); err != nil {
				return err
			}
			var err error
			if ch, err = p.challenge(nonce, ws); err != nil {
				p.closeChallenge()
				return failf(ReasonBoxSetupFailed, "set up the challenge: %v", err)
			}
			chb, _ := json.MarshalIndent(ch, "", "  ")
			if err := os.WriteFile(filepath.Join(p.l.RunDir(), ChallengeFile), chb, 0o600); err != nil {
				p.closeChallenge()
				return err
			}
			return nil
		},
		Undo: func(error) { p.closeChallenge() },
	}); err != nil {
		return err
	}

	var pl *plan.Plan
	var req Requirements
	if err := do(launch.Stage{Name: stagePlan, Do: func(context.Context) error {
		var err error
		pl, err = plan.Build(plan.Input{
			ID: id, Profile: "readiness", Program: p.exe, Args: []string{AttestCommand}, Workspace: ws, Home: p.home,
			UID: os.Getuid(), GID: os.Getgid(), Env: probeEnv(ch), RunDir: p.l.RunDir(), Console: plan.ConsolePipe, Egress: plan.EgressDeny,
		})
		if err != nil {
			return failf(ReasonBoxSetupFailed, "plan: %v", err)
		}
		req = RequirementsFor(pl, nonce, p.o.Config.Egress == config.EgressAllow)
		if p.o.ModifyPlan != nil {
			p.o.ModifyPlan(pl)
		}
		return nil
	}}); err != nil {
		return err
	}
	timeout := time.Minute
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Second)
	}
	scfg := shim.Config{LaunchID: id, Engine: p.eng.Name(), Console: plan.ConsolePipe, AttachTimeout: timeout, StopGrace: time.Second}
	if err := do(p.l.Request(p.eng, pl, scfg)); err != nil {
		return err
	}

	// Start the box the way the daemon starts a launch: a spare shim (with its prestarted
	// box-init) handed the launch, watched, and a console client. Without the daemon's
	// fallback to a fresh shim: what the probe attests is the spare's path.
	if err := do(launch.Stage{Name: launch.StageShim,
		Do: func(ctx context.Context) error {
			sp, err := shim.StartSpare()
			if err != nil {
				return failf(ReasonBoxSetupFailed, "start the probe's shim: %v", err)
			}
			if err := p.l.Shim(sp, false).Do(ctx); err != nil {
				return failf(ReasonBoxSetupFailed, "start the probe's shim: %v", err)
			}
			p.shimPid = p.l.ShimPid
			if err := writeRef(filepath.Join(p.dir, shimFile), p.shimPid, p.l.ShimStartTime); err != nil {
				p.stopShim()
				return err
			}
			return nil
		},
		Undo: func(error) { p.stopShim() },
	}); err != nil {
		return err
	}
	watch := p.l.Watch()
	watch.Undo = func(error) { p.stopWatched() }
	if err := do(watch.MapErr(func(err error) error {
		return failf(ReasonBoxSetupFailed, "watch the probe's shim: %v", err)
	})); err != nil {
		return err
	}
	p.watcher = p.l.Watcher
	var (
		stderr   limitedBuffer
		attached = make(chan error, 1)
		lines    = make(chan []byte, 1)
	)
	if err := do(launch.Stage{Name: stageAttach,
		Do: func(context.Context) error {
			inR, inW, err := os.Pipe()
			if err != nil {
				return err
			}
			outR, outW, err := os.Pipe()
			if err != nil {
				inR.Close()
				inW.Close()
				return err
			}
			errR, errW, err := os.Pipe()
			if err != nil {
				inR.Close()
				inW.Close()
				outR.Close()
				outW.Close()
				return err
			}
			p.stdinW = inW
			go func() {
				_, err := console.Attach(p.l.Socket(), inR, outW, errW, console.AttachOptions{NoSignals: true})
				inR.Close()
				outW.Close()
				errW.Close()
				attached <- err
			}()
			go io.Copy(&stderr, errR)
			go func() {
				defer outR.Close()
				line, _ := bufio.NewReaderSize(outR, 1<<20).ReadBytes('\n')
				lines <- line
				io.Copy(io.Discard, outR)
			}()
			return nil
		},
		// The attester waits on its input: closing it releases it.
		Undo: func(error) {
			if p.stdinW != nil {
				p.stdinW.Close()
				p.stdinW = nil
			}
		},
	}); err != nil {
		return err
	}

	// Wait for the box to start (its namespaces are then known) or to fail.
	var started *shim.Status
	for started == nil {
		select {
		case ev, ok := <-p.watcher.Events:
			if !ok {
				return failf(ReasonBoxSetupFailed, "the probe's shim went away")
			}
			if ev.Kind == shim.EventExit {
				p.finished, p.final = true, &ev.Status
				return startFailure(&ev.Status, res.Kernel, stderr.String())
			}
			if ev.Status.BoxPid != 0 && len(ev.Status.Namespaces) > 0 {
				st := ev.Status
				started = &st
			}
		case <-ctx.Done():
			return failf(ReasonProbeTimeout, "the probe box did not start: %v", ctx.Err())
		}
	}
	p.pidNS = started.Namespaces["pid"]
	if own, err := ns.Inode(os.Getpid(), "pid"); err != nil || own == p.pidNS {
		// The box is not in a pid namespace of its own: nothing can prove its end, and no
		// process of "its" namespace may be killed.
		p.pidNS = 0
		return failf(ReasonAttestationFailed, "namespaces.pid: the shim recorded the host's pid namespace for the box")
	}
	// Pin the namespace while the box runs, so that its inode number cannot be reused by
	// another namespace while this probe checks (and, failing, kills) its processes.
	var err error
	if p.pin, p.init, err = pinNamespace(p.pidNS); err != nil {
		p.log.Warn("readiness: pin the probe box's pid namespace", "err", err)
	}
	if err := writeRef(filepath.Join(p.dir, boxFile), p.init.Pid, p.init.Start, p.pidNS); err != nil {
		p.log.Warn("readiness: record probe box", "err", err)
	}
	if p.o.AfterStart != nil {
		p.o.AfterStart()
	}

	obs := Observed{BoxNamespaces: started.Namespaces, HostNamespaces: ownNamespaces()}
	var att *Attestation
	var attErr error
	events := p.watcher.Events
read:
	for {
		select {
		case line := <-lines:
			if len(line) > 0 {
				att, attErr = DecodeAttestation(line)
				break read
			}
			// No output: the box failed to start, or its program died. The shim says which.
			lines = nil
			attErr = errors.New("the box printed no attestation")
			if events == nil {
				break read
			}
		case ev, ok := <-events:
			if !ok {
				events = nil // the output still tells
				if lines == nil {
					break read
				}
				continue
			}
			if ev.Kind == shim.EventExit {
				p.finished, p.final = true, &ev.Status
				if ev.Status.Error != nil {
					return startFailure(&ev.Status, res.Kernel, stderr.String())
				}
				if lines == nil {
					break read
				}
			}
		case <-ctx.Done():
			return failf(ReasonProbeTimeout, "no attestation from the probe box: %v", ctx.Err())
		}
	}

	// While the box runs: its grandchild must be visible host-side in the box's pid namespace.
	var gcFD = -1
	if att != nil && att.Grandchild != nil && p.pin != nil {
		gcFD, obs.GrandchildDetail = findInNamespace(p.pidNS, *att.Grandchild)
		obs.GrandchildSeen = gcFD >= 0
	} else {
		obs.GrandchildDetail = "no grandchild attested"
	}
	// Release the attester and wait for the end of the box, as the shim reports it.
	p.stdinW.Close()
	p.stdinW = nil
	for !p.finished {
		select {
		case ev, ok := <-p.watcher.Events:
			if !ok {
				return failf(ReasonUnsettled, "the probe's shim went away without a final status")
			}
			if ev.Kind == shim.EventExit {
				p.finished, p.final = true, &ev.Status
			}
		case <-ctx.Done():
			return failf(ReasonProbeTimeout, "the probe box did not end: %v", ctx.Err())
		}
	}
	<-attached
	// The shim exits once its console client has closed: a probe leaves no process behind.
	if !waitGone(p.shimPid, 5*time.Second) {
		p.log.Warn("readiness: the probe's shim lingers after its end; killing it", "pid", p.shimPid)
		killRef(procRef{Pid: p.shimPid})
	}
	obs.Settled = p.final.Settled
	obs.ExitCode = p.final.ExitCode
	obs.ListenerHits = int(p.hits.Load())
	obs.ListenerForeign = int(p.foreign.Load())
	// After the end: nothing of the box's pid namespace remains, the grandchild included.
	var left []int
	err = errors.New("the box's pid namespace was not pinned")
	if p.pin != nil {
		left, err = running(p.pidNS)
	}
	obs.GrandchildGone = err == nil && len(left) == 0 && !alive(p.init)
	if gcFD >= 0 {
		if unix.PidfdSendSignal(gcFD, 0, nil, 0) == nil {
			obs.GrandchildGone = false
		}
		unix.Close(gcFD)
	}
	if !obs.GrandchildGone {
		obs.GrandchildDetail += fmt.Sprintf("; after teardown: %v remain (%v)", left, err)
	}
	if attErr != nil {
		detail := attErr.Error()
		if s := stderr.String(); s != "" {
			detail += ": " + s
		}
		res.Facts, _ = Verify(nil, obs, req)
		return failf(ReasonAttestationFailed, "%s", detail)
	}
	facts, verr := Verify(att, obs, req)
	res.Facts = facts
	if verr != nil {
		return verr
	}
	return nil
}

// startFailure classifies a launch that ended before its program ran.
func startFailure(st *shim.Status, host map[string]string, stderr string) *Error {
	if st.Error != nil {
		return Classify(st.Error.Code, st.Error.Message, host)
	}
	msg := fmt.Sprintf("the probe box ended before attesting (exit %v)", ptrInt(st.ExitCode))
	if stderr != "" {
		msg += ": " + stderr
	}
	return failf(ReasonAttestationFailed, "%s", msg)
}

func ptrInt(p *int) any {
	if p == nil {
		return "none"
	}
	return *p
}

// challenge opens the host endpoints the box must not reach and writes the ~/.ssh canary.
func (p *prober) challenge(nonce, ws string) (*Challenge, error) {
	ch := &Challenge{Version: SchemaVersion, Nonce: nonce, Workspace: ws, HostPids: []int{os.Getpid(), os.Getppid()}}
	tcp, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.serve(tcp)
	ch.TCPPort = tcp.Addr().(*net.TCPAddr).Port
	ch.Abstract = "agentbox-readiness-" + nonce
	abs, err := net.Listen("unix", "@"+ch.Abstract)
	if err != nil {
		return nil, err
	}
	p.serve(abs)
	path := filepath.Join(p.dir, hostSock)
	ps, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	p.serve(ps)
	ch.HostSockets = []string{path, "/run/dbus/system_bus_socket", fmt.Sprintf("/run/user/%d/bus", os.Getuid())}
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		ch.HostSockets = append(ch.HostSockets, filepath.Join(x, "bus"), filepath.Join(x, "wayland-0"), filepath.Join(x, "wayland-1"))
	}
	ssh := filepath.Join(p.home, ".ssh")
	if _, err := os.Lstat(ssh); errors.Is(err, os.ErrNotExist) {
		if err := os.Mkdir(ssh, 0o700); err != nil {
			return nil, fmt.Errorf("create %s for the canary: %w", ssh, err)
		}
		p.madeSSH = true
	}
	p.canary = filepath.Join(ssh, CanaryName)
	os.Remove(p.canary)
	if err := os.WriteFile(p.canary, []byte("agentbox readiness canary "+nonce+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("write the canary: %w", err)
	}
	ch.Secret = p.canary
	return ch, nil
}

// probeEnv is the caller environment the probe's plan starts from: what a user's terminal
// holds, GUI and bus variables included, so that the attester proves the plan drops them.
func probeEnv(ch *Challenge) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "DISPLAY=:0", "WAYLAND_DISPLAY=wayland-0",
		"DBUS_SESSION_BUS_ADDRESS=unix:path=" + ch.HostSockets[0], "XDG_RUNTIME_DIR=" + filepath.Dir(ch.HostSockets[0]),
		"AGENTBOX_READINESS_SECRET=" + ch.Nonce}
	return env
}

// serve accepts and counts connections on a host listener: any from the daemon's own uid (a
// box runs as it) is a breach of the boundary. A connection another local user made is not the
// box's and is only logged: another user could otherwise fail every probe, and so refuse every
// launch, by connecting in a loop to the names /proc/net/unix and /proc/net/tcp show.
func (p *prober) serve(ln net.Listener) {
	p.listeners = append(p.listeners, ln)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if why, foreign := foreignPeer(c); foreign {
				if p.foreign.Add(1) == 1 { // once a probe: a flood must not flood the log
					p.log.Warn("readiness: a connection to a probe listener not counted", "listener", ln.Addr().String(), "peer", why)
				}
			} else {
				p.hits.Add(1)
			}
			c.Close()
		}
	}()
}

// foreignPeer reports whether the peer of c is known not to be the box, and why. For a unix
// socket SO_PEERCRED names its uid: another uid is not the box. For TCP the peer's socket is
// looked up in this network namespace's /proc/net/tcp: an open socket names its owner; a
// time-wait entry (the peer closed at once) names none and is not counted either, since any
// local user can make those. A peer that cannot be found there (another network namespace),
// or whose credentials cannot be read, counts. A breach does not rest on this count alone: the
// attester in the box reports its own connection attempts (network.host_tcp_unreachable,
// network.host_abstract_unreachable).
func foreignPeer(c net.Conn) (why string, foreign bool) {
	switch c := c.(type) {
	case *net.UnixConn:
		_, uid, _, err := safesocket.PeerCred(c)
		if err == nil && !safesocket.OwnUID(uid) {
			return "uid " + strconv.Itoa(uid), true
		}
	case *net.TCPConn:
		local, ok1 := c.LocalAddr().(*net.TCPAddr)
		remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
		if !ok1 || !ok2 {
			return "", false
		}
		b, err := os.ReadFile("/proc/self/net/tcp")
		if err != nil {
			return "", false
		}
		switch uid, open, found := tcpOwner(b, remote, local); {
		case found && !open:
			return "closed before it could be attributed", true
		case found && !safesocket.OwnUID(uid):
			return "uid " + strconv.Itoa(uid), true
		}
	}
	return "", false
}

// tcpOwner finds in table (/proc/net/tcp) the socket whose local address is from and whose
// remote address is to. open is false for a time-wait entry (inode 0), which has no owner;
// otherwise uid is the socket's owner.
func tcpOwner(table []byte, from, to *net.TCPAddr) (uid int, open, found bool) {
	hexAddr := func(a *net.TCPAddr) string {
		ip := a.IP.To4()
		if ip == nil {
			return ""
		}
		// The kernel prints the address as a host-order (little-endian here) 32-bit number.
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
	}
	want, peer := hexAddr(from), hexAddr(to)
	if want == "" || peer == "" {
		return 0, false, false
	}
	for _, line := range strings.Split(string(table), "\n") {
		f := strings.Fields(line)
		// sl local rem st queues timer retrnsmt uid timeout inode …
		if len(f) < 10 || f[1] != want || f[2] != peer {
			continue
		}
		if f[9] == "0" {
			return 0, false, true
		}
		u, err := strconv.Atoi(f[7])
		if err != nil {
			return 0, false, false
		}
		return u, true, true
	}
	return 0, false, false
}

// cleanup ends the probe by rolling its launch back (it is never handed over): the attester's
// input is closed, a box still running is stopped and its settlement verified, then the host
// endpoints, the canary and the probe directory are removed. A box that cannot be proven gone
// keeps its directory, for the next probe to reclaim.
func (p *prober) cleanup() {
	p.stages.Rollback(nil)
}

// stopWatched is the watch stage's undo: an unfinished box is asked to stop through the shim
// (and its end awaited, briefly); then the watch is closed.
func (p *prober) stopWatched() {
	if !p.finished {
		if err := p.watcher.Stop(); err == nil {
			deadline := time.After(3 * time.Second)
		wait:
			for {
				select {
				case ev, ok := <-p.watcher.Events:
					if !ok || ev.Kind == shim.EventExit {
						break wait
					}
				case <-deadline:
					break wait
				}
			}
		}
	}
	p.watcher.Close()
}

// stopShim is the shim stage's undo: an unfinished box's shim is killed (the box dies with it),
// then whatever remains in the box's pid namespace; p.unsettled records a box not proven gone.
func (p *prober) stopShim() {
	if p.finished {
		return
	}
	killRef(procRef{Pid: p.shimPid})
	p.unsettled = !settleBox(p.init, p.pin, p.log)
}

// closeChallenge is the challenge stage's undo: the host endpoints close and the canary goes.
func (p *prober) closeChallenge() {
	for _, ln := range p.listeners {
		ln.Close()
	}
	p.listeners = nil
	p.removeCanary()
}

// keepDir is asked by the layout stage's undo: it reports whether the probe directory must be
// kept because the box is not proven gone, and releases the pin on the box's pid namespace.
func (p *prober) keepDir() bool {
	settled := !p.unsettled
	if settled && p.init.Pid != 0 && alive(p.init) {
		settled = false
	}
	if settled && p.pin != nil {
		if left, err := running(p.pidNS); err != nil || len(left) > 0 {
			settled = false
		}
	}
	p.pin.close()
	if !settled {
		p.log.Error("readiness: probe box not proven gone; its directory is kept for the next probe", "dir", p.dir)
	}
	return !settled
}

func (p *prober) removeCanary() {
	if p.canary == "" {
		return
	}
	if err := os.Remove(p.canary); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.log.Warn("readiness: remove canary", "path", p.canary, "err", err)
	}
	if p.madeSSH {
		os.Remove(filepath.Dir(p.canary)) // only if still empty
	}
}

// Reclaim removes what probes killed mid-way left in runtimeDir: it kills their shims and
// boxes, verifies that their pid namespaces are empty, and removes their directories and the
// ~/.ssh canary. It must run under the probe lock. It fails when a box cannot be proven gone.
func Reclaim(runtimeDir, home string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	root := filepath.Join(runtimeDir, ProbesDir)
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	var failed []string
	for _, e := range ents {
		dir := filepath.Join(root, e.Name())
		if !e.IsDir() {
			continue
		}
		box, _ := readRef(filepath.Join(dir, boxFile))
		if ref, err := readRef(filepath.Join(dir, shimFile)); err == nil && proc.Same(ref.Pid, ref.Start) {
			log.Info("readiness: reclaiming an abandoned probe", "dir", dir, "shim", ref.Pid)
			killRef(ref)
		}
		// The box ends with its PID 1: once that process (the very one, by start time) is
		// gone, the kernel has ended every process of its pid namespace. While it lives, its
		// namespace is pinned through it, so that stragglers are found by an inode number no
		// other namespace can have meanwhile.
		if alive(box) {
			pin, err := pinProcess(box.Pid, box.PidNS)
			ok := settleBox(box, pin, log) // without a pin (PID 1 just died): by PID 1 alone
			pin.close()
			if !ok || (err != nil && alive(box)) {
				failed = append(failed, dir)
				continue
			}
		} else if box.Pid != 0 && proc.Same(box.Pid, box.Start) && !waitGone(box.Pid, settleWait) {
			// PID 1 is a zombie, but its thread group may not have ended: box-init's leader
			// thread exits first, and the kernel ends the namespace's other processes only
			// when the group's last thread exits. Taken for the box's end, a probe whose box
			// was ending meanwhile (its shim just killed, box-init with it) was reclaimed with
			// the box's processes still running (TestReclaimAfterKilledProbe, as the ordinary
			// user in a .ci/run). The leader's pidfd is readable once the whole group has
			// exited.
			log.Error("readiness: the probe box's PID 1 has not ended", "pid", box.Pid)
			failed = append(failed, dir)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			failed = append(failed, dir)
		}
	}
	if home != "" {
		if err := os.Remove(filepath.Join(home, ".ssh", CanaryName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			log.Warn("readiness: remove stale canary", "err", err)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("left behind: %v", failed)
	}
	return nil
}

// pinnedNS is an open descriptor of a pid namespace: while it is held, the namespace's inode
// number names it alone.
type pinnedNS struct {
	fd  int
	ino uint64
}

func (p *pinnedNS) close() {
	if p != nil && p.fd >= 0 {
		unix.Close(p.fd)
		p.fd = -1
	}
}

// pinNamespace pins pid namespace ino through one of its live processes and finds its PID 1.
func pinNamespace(ino uint64) (*pinnedNS, procRef, error) {
	pids, err := ns.Remaining(ino)
	if err != nil {
		return nil, procRef{}, err
	}
	var pin *pinnedNS
	var init procRef
	for _, pid := range pids {
		if pin == nil {
			if p, err := pinProcess(pid, ino); err == nil {
				pin = p
			}
		}
		if init.Pid == 0 && ns.InnermostPid(pid) == 1 {
			start, err := proc.StartTime(pid)
			if err == nil {
				init = procRef{Pid: pid, Start: start, PidNS: ino}
			}
		}
	}
	if pin == nil {
		return nil, init, fmt.Errorf("no live process in pid namespace %d", ino)
	}
	// The init found by the scan must be the namespace's own (checked against the pin).
	if init.Pid != 0 {
		if got, err := ns.Inode(init.Pid, "pid"); err != nil || got != ino {
			init = procRef{}
		}
	}
	return pin, init, nil
}

// pinProcess opens pid's pid namespace and checks that it is ino.
func pinProcess(pid int, ino uint64) (*pinnedNS, error) {
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/pid", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != ino {
		unix.Close(fd)
		return nil, fmt.Errorf("process %d is not in pid namespace %d", pid, ino)
	}
	return &pinnedNS{fd: fd, ino: ino}, nil
}

// settleBox ends a box and proves it: SIGKILL to its PID 1 (the very process, by start time),
// after which the kernel ends every process of its pid namespace; then, with the namespace
// pinned, a scan for stragglers (killed too) until none remains. It never kills by a pid
// namespace inode it has not pinned, and never in the prober's own pid namespace.
func settleBox(init procRef, pin *pinnedNS, log *slog.Logger) bool {
	if init.Pid != 0 {
		killRef(init)
		if alive(init) {
			log.Error("readiness: the probe box's PID 1 survives SIGKILL", "pid", init.Pid)
			return false
		}
	}
	if pin == nil {
		return init.Pid != 0
	}
	if own, err := ns.Inode(os.Getpid(), "pid"); err != nil || own == pin.ino {
		log.Error("readiness: refusing to settle the prober's own pid namespace", "pidNS", pin.ino)
		return false
	}
	deadline := time.Now().Add(settleWait)
	for {
		left, err := running(pin.ino)
		if err != nil {
			log.Error("readiness: scan the probe box's pid namespace", "err", err)
			return false
		}
		if len(left) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			log.Error("readiness: processes of the probe box remain", "pids", left)
			return false
		}
		for _, pid := range left {
			ns.Kill(pid, pin.ino)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running lists the processes of pid namespace ino that have not ended. A zombie has ended:
// the box's PID 1, once its parent (the shim) is gone, may wait as a zombie for an unrelated
// reaper, with nothing of the box left to run.
func running(ino uint64) ([]int, error) {
	pids, err := ns.Remaining(ino)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, pid := range pids {
		if !proc.Ended(pid) {
			out = append(out, pid)
		}
	}
	return out, nil
}

// alive reports whether the process ref names (pid and start time) still runs: a zombie has
// ended. (A pid namespace whose PID 1 is a zombie may still have other processes: a
// multithreaded PID 1's leader thread is a zombie before its other threads exit, and the
// namespace's other processes end only after them; Reclaim waits for the whole group.)
func alive(ref procRef) bool {
	return ref.Pid != 0 && proc.Same(ref.Pid, ref.Start) && !proc.Ended(ref.Pid)
}

// waitGone waits (bounded) until pid has exited, through a pidfd.
func waitGone(pid int, d time.Duration) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return true // already gone (and reaped)
	}
	defer unix.Close(fd)
	return proc.WaitPidfd(fd, d)
}

// killRef sends SIGKILL to the process ref names (when Start is set, only if it still is that
// process) and waits briefly for it to go (killWait). A signal to this process does not end the
// wait: it ended a single poll(2), and under load the next probe took an abandoned box's PID 1,
// SIGKILLed 49 ms before and still ending its namespace's processes, for one that survives
// SIGKILL, and failed as probe_unsettled (TestReclaimAfterKilledProbe, bwrap).
func killRef(ref procRef) {
	fd, err := unix.PidfdOpen(ref.Pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if ref.Start != 0 {
		if s, err := proc.StartTime(ref.Pid); err != nil || s != ref.Start {
			return
		}
	}
	unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	proc.WaitPidfd(fd, killWait)
}

// killWait bounds killRef's wait for a killed process to go.
const killWait = 2 * time.Second

// findInNamespace finds the host process whose innermost pid is boxPid in pid namespace pidNS
// and returns a pidfd on it (or -1) and what it saw.
func findInNamespace(pidNS uint64, boxPid int) (int, string) {
	pids, err := ns.Remaining(pidNS)
	if err != nil {
		return -1, err.Error()
	}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			v, ok := strings.CutPrefix(line, "NSpid:")
			if !ok {
				continue
			}
			f := strings.Fields(v)
			if len(f) > 1 && f[len(f)-1] == strconv.Itoa(boxPid) {
				fd, err := unix.PidfdOpen(pid, 0)
				if err != nil {
					return -1, fmt.Sprintf("host pid %d: %v", pid, err)
				}
				return fd, fmt.Sprintf("grandchild %d is host pid %d in pid namespace %d (%d processes in the box)", boxPid, pid, pidNS, len(pids))
			}
		}
	}
	return -1, fmt.Sprintf("no process with box pid %d among %v in pid namespace %d", boxPid, pids, pidNS)
}

func ownNamespaces() map[string]uint64 {
	m := map[string]uint64{}
	for _, k := range ns.Kinds {
		var st unix.Stat_t
		if unix.Stat("/proc/self/ns/"+k, &st) == nil {
			m[k] = st.Ino
		}
	}
	return m
}

func writeRef(path string, pid int, start uint64, pidNS ...uint64) error {
	r := procRef{Pid: pid, Start: start}
	if len(pidNS) > 0 {
		r.PidNS = pidNS[0]
	}
	if start == 0 && pid != 0 {
		r.Start, _ = proc.StartTime(pid)
	}
	b, _ := json.Marshal(r)
	return os.WriteFile(path, b, 0o600)
}

func readRef(path string) (procRef, error) {
	var r procRef
	b, err := os.ReadFile(path)
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

type limitedBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if rest := 4096 - len(l.b); rest > 0 {
		l.b = append(l.b, p[:min(rest, len(p))]...)
	}
	return len(p), nil
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.TrimSpace(string(l.b))
}
