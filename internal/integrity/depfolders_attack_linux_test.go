package integrity_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// hostRun runs a program on the host in dir and returns its combined output.
func hostRun(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	c := exec.Command(name, args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("the host's %s %v in %s: %v\n%s", name, args, dir, err, out)
	}
	return string(out)
}

// TestAttackBuildToolAndEditorHooks: Maven's .mvn/jvm.config (and its other project files),
// Gradle's gradle.properties and wrapper properties, Cursor's and Windsurf's hooks.json,
// written by a box at the workspace's top (protected: kept as proposed changes) and in a
// project below it (moved aside at exit). The host's mvn -v, at the top and in the project,
// must not load the box's Java agent. Before (review 14, F5, F12), they stayed, and mvn -v ran
// the agent's premain.
func TestAttackBuildToolAndEditorHooks(t *testing.T) {
	t.Parallel()
	e := newDaemonEnv(t)
	repo(t, e.work)
	mark, _ := e.marker("mvn-javaagent")
	agent := ""
	_, mvnErr := exec.LookPath("mvn")
	_, javacErr := exec.LookPath("javac")
	_, jarErr := exec.LookPath("jar")
	if mvnErr == nil && javacErr == nil && jarErr == nil {
		// The agent lies outside the workspace: the box only names it.
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		write(t, filepath.Join(dir, "A.java"), fmt.Sprintf("public class A { public static void premain(String a) throws Exception { new java.io.File(%q).createNewFile(); } }\n", mark))
		write(t, filepath.Join(dir, "m.txt"), "Premain-Class: A\n")
		hostRun(t, dir, "javac", "A.java")
		hostRun(t, dir, "jar", "cfm", "agent.jar", "m.txt", "A.class")
		agent = filepath.Join(dir, "agent.jar")
	}
	pom := "<project><modelVersion>4.0.0</modelVersion><groupId>x</groupId><artifactId>x</artifactId><version>1</version></project>\n"
	write(t, filepath.Join(e.work, "pom.xml"), pom)
	write(t, filepath.Join(e.work, "app", "pom.xml"), pom)
	git(t, e.work, "add", "-A")
	git(t, e.work, "commit", "-q", "-m", "maven")
	plants := map[string]string{
		".mvn/jvm.config":                          "-javaagent:" + agent,
		".mvn/maven.config":                        "-s /tmp/pwned.xml",
		".mvn/extensions.xml":                      "<extensions/>",
		".mvn/wrapper/maven-wrapper.properties":    "distributionUrl=file:///tmp/pwned.zip",
		"gradle.properties":                        "org.gradle.jvmargs=-javaagent:" + agent,
		"gradle/wrapper/gradle-wrapper.properties": "distributionUrl=file:///tmp/pwned.zip",
		".cursor/hooks.json":                       `{"version":1,"hooks":{"sessionStart":[{"command":"touch /tmp/pwned"}]}}`,
		".windsurf/hooks.json":                     `{"hooks":{"pre_run_command":[{"command":"touch /tmp/pwned"}]}}`,
	}
	var script strings.Builder
	for rel, content := range plants {
		for _, p := range []string{rel, filepath.Join("app", rel)} {
			fmt.Fprintf(&script, "mkdir -p %s && printf '%%s\\n' %s > %s\n", filepath.Dir(p), shellQuote(content), p)
		}
	}
	script.WriteString("echo planted\n")
	out := e.boxPlant(script.String())
	if !strings.Contains(out, "planted") {
		t.Fatalf("the plant failed (the test would prove nothing):\n%s", out)
	}
	for rel := range plants {
		for _, p := range []string{rel, filepath.Join("app", rel)} {
			if _, err := os.Lstat(filepath.Join(e.work, p)); err == nil {
				t.Errorf("%s is where the tool reads it after the box", p)
			}
		}
	}
	if agent == "" {
		t.Log("mvn, javac or jar not installed: the host's mvn was not run")
		return
	}
	for _, dir := range []string{e.work, filepath.Join(e.work, "app")} {
		hostRun(t, dir, "mvn", "-v")
		notRun(t, mark, "the host's mvn -v in "+dir, out)
	}
}
