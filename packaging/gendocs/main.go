// Command gendocs writes agentbox's man pages (gzipped, section 1) and shell completions (bash,
// zsh, fish) from the CLI's command tree, for the package. The output is deterministic: the
// man pages' date comes from SOURCE_DATE_EPOCH (else the Unix epoch) and gzip records no name
// or time.
package main

import (
	"bytes"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/agentbox/agentbox/internal/cli"
	"github.com/agentbox/agentbox/internal/cli/heavy"
)

func main() {
	out := flag.String("out", "dist/pkgroot", "output directory (man/ and completions/ are created in it)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	date := time.Unix(0, 0).UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		date = time.Unix(n, 0).UTC()
	}
	cli.Heavy.Commands = heavy.Commands // the daemon binary's commands too: the pages document them all
	root := cli.Command()
	root.DisableAutoGenTag = true
	man := filepath.Join(out, "man")
	if err := os.MkdirAll(man, 0o755); err != nil {
		return err
	}
	if err := genMan(root, man, &doc.GenManHeader{Title: "AGENTBOX", Section: "1", Date: &date, Source: "agentbox " + cli.Version, Manual: "agentbox manual"}); err != nil {
		return err
	}
	comp := filepath.Join(out, "completions")
	if err := os.MkdirAll(comp, 0o755); err != nil {
		return err
	}
	for name, gen := range map[string]func(*bytes.Buffer) error{
		"agentbox.bash": func(b *bytes.Buffer) error { return root.GenBashCompletionV2(b, true) },
		"_agentbox":     func(b *bytes.Buffer) error { return root.GenZshCompletion(b) },
		"agentbox.fish": func(b *bytes.Buffer) error { return root.GenFishCompletion(b, true) },
	} {
		var b bytes.Buffer
		if err := gen(&b); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(comp, name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// genMan writes one gzipped page per available command (agentbox-wrap-install.1.gz, …).
func genMan(cmd *cobra.Command, dir string, h *doc.GenManHeader) error {
	for _, c := range cmd.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := genMan(c, dir, h); err != nil {
			return err
		}
	}
	hc := *h
	var page bytes.Buffer
	if err := doc.GenMan(cmd, &hc, &page); err != nil {
		return fmt.Errorf("man page of %s: %w", cmd.CommandPath(), err)
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := zw.Write(page.Bytes()); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	name := filepath.Join(dir, filepath.Base(cmdFile(cmd))+".1.gz")
	return os.WriteFile(name, gz.Bytes(), 0o644)
}

func cmdFile(cmd *cobra.Command) string {
	b := []byte(cmd.CommandPath())
	for i := range b {
		if b[i] == ' ' {
			b[i] = '-'
		}
	}
	return string(b)
}
