package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentbox/agentbox/internal/api"
	"github.com/agentbox/agentbox/internal/config"
	"github.com/agentbox/agentbox/internal/sshbroker"
	"github.com/agentbox/agentbox/internal/sshbroker/sshtest"
)

// TestSSHBrokerInBox runs real ssh, ssh-add and git inside a real box launched by the daemon
// with git.ssh configured: the box's agent lists only the granted key and refuses to remove
// keys, and git clones and pushes over ssh through the box's leg to a real sshd.
func TestSSHBrokerInBox(t *testing.T) {
	sshtest.Need(t, "ssh", "ssh-add", "ssh-agent", "ssh-keygen", "git")
	dir := sshtest.ShortTempDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	granted := sshtest.Keygen(t, filepath.Join(dir, "granted"), "ed25519", "granted@test")
	other := sshtest.Keygen(t, filepath.Join(dir, "other"), "ed25519", "other@test")
	ag := sshtest.StartAgent(t, dir, granted, other)
	srv := sshtest.StartSSHD(t, dir, granted)
	bare := srv.BareRepo(t, "repo.git", 0)
	kh := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(kh, []byte(srv.KnownHostsLine("[localhost]:"+strconv.Itoa(srv.Port), true)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	t.Setenv("SSH_AUTH_SOCK", ag.Socket)
	td := startDaemonOpts(t, Options{brokers: brokerHooks{
		sshConfig: func(config.Config) sshbroker.Config {
			return sshbroker.Config{Hosts: []string{srv.HostEntry()}, Keys: []string{granted.FP}}
		},
		sshKnownHosts: []string{kh},
	}})
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	remote := srv.User + "@localhost:" + bare
	script := `exec >out.txt 2>&1
echo "SSH_AUTH_SOCK=$SSH_AUTH_SOCK"
echo "GIT_SSH_COMMAND=$GIT_SSH_COMMAND"
echo "== list"; ssh-add -l; echo "list=$?"
echo "== delete"; ssh-add -D; echo "delete=$?"
export GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME=box GIT_AUTHOR_EMAIL=box@example.com GIT_COMMITTER_NAME=box GIT_COMMITTER_EMAIL=box@example.com
echo "== clone"; git clone -q ` + remote + ` clone; echo "clone=$?"
cd clone && echo box > from-box && git add from-box && git commit -q -m "from the box" && git push -q origin main; echo "push=$?"
`
	l := td.runToEnd(t, &api.LaunchRequest{Program: "sh", Path: sh, Args: []string{"-c", script}, Workspace: td.work})
	outB, _ := os.ReadFile(filepath.Join(td.work, "out.txt"))
	out := string(outB)
	if l.State != api.StateExited || l.ExitCode == nil || *l.ExitCode != 0 {
		t.Fatalf("box ended %s (exit %v):\n%s", l.State, l.ExitCode, out)
	}
	for _, want := range []string{
		"SSH_AUTH_SOCK=" + sshbroker.BoxAgentSocket,
		"GIT_SSH_COMMAND=ssh -F " + sshbroker.BoxSSHConfig,
		granted.FP, "list=0", "clone=0", "push=0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("box output lacks %q", want)
		}
	}
	if strings.Contains(out, other.FP) || strings.Contains(out, "delete=0") {
		t.Errorf("the box saw the other key or removed keys")
	}
	if t.Failed() {
		t.Fatalf("box output:\n%s", out)
	}
	real := sshtest.Run(t, ag.Env(), "ssh-add", "-l")
	if !strings.Contains(real, granted.FP) || !strings.Contains(real, other.FP) {
		t.Fatalf("the user's agent changed:\n%s", real)
	}
	if head := strings.TrimSpace(sshtest.Run(t, nil, "git", "-C", bare, "log", "-1", "--format=%s", "main")); head != "from the box" {
		t.Fatalf("server main is %q", head)
	}
	// The launch's sockets are gone with the box.
	waitFor(t, "launch directory removed", func() bool {
		_, err := os.Stat(filepath.Join(td.launches, l.ID))
		return os.IsNotExist(err)
	})
}
