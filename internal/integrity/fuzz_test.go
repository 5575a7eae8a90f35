package integrity

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"
)

// The daemon parses what a box wrote in the workspace: its git index, packed-refs, a
// sequencer todo, a package.json, a skill's frontmatter. A box controls every byte, and a
// panic there would end the daemon (every launch of the user) instead of one check.

// fuzzIndex returns a version 2 index of the names, object ids of idLen bytes, with a TREE
// extension and its checksum under idLen's hash, as git writes one.
func fuzzIndex(idLen int, names ...string) []byte {
	var b bytes.Buffer
	b.WriteString("DIRC")
	binary.Write(&b, binary.BigEndian, uint32(2))
	binary.Write(&b, binary.BigEndian, uint32(len(names)))
	for _, n := range names {
		start := b.Len()
		b.Write(make([]byte, 24))
		binary.Write(&b, binary.BigEndian, uint32(0o100644))
		b.Write(make([]byte, 12))
		b.Write(bytes.Repeat([]byte{0xab}, idLen))
		binary.Write(&b, binary.BigEndian, uint16(len(n)))
		b.WriteString(n)
		for pad := 8 - (b.Len()-start)%8; pad > 0; pad-- {
			b.WriteByte(0)
		}
	}
	b.WriteString("TREE")
	binary.Write(&b, binary.BigEndian, uint32(6))
	b.WriteString("\x001 0\n\x00")
	if idLen == sha256.Size {
		s := sha256.Sum256(b.Bytes())
		b.Write(s[:])
	} else {
		s := sha1.Sum(b.Bytes())
		b.Write(s[:])
	}
	return b.Bytes()
}

// FuzzIndexParse: any index a box writes is either refused with an error or read; an index the
// check rewrites (flags and stat data cleared, extensions stripped) reads again with the same
// entries, so that what the host's git then reads is what the check read, and is the same when
// its extensions are read from the file rather than from memory (an index past the bound).
func FuzzIndexParse(f *testing.F) {
	for _, n := range []int{sha1.Size, sha256.Size} {
		seed := fuzzIndex(n, "Makefile", "a/b.go")
		if es, exts, err := indexContents(seed, n); err != nil || len(es) != 2 || len(exts) != 1 {
			f.Fatalf("the seed index (%d-byte ids) reads as %d entries, %d extensions, %v", n, len(es), len(exts), err)
		}
		f.Add(seed, n == sha256.Size)
	}
	f.Add([]byte("DIRC\x00\x00\x00\x02\x00\x00\x00\x01garbage-garbage-garbage-garbage"), false)
	// A split index whose link deletes shared entry 1 and replaces none (EWAH: 1 word, a
	// run-length word with one literal word after it, then the literal, the RLW's position).
	split := fuzzIndex(sha1.Size, "Makefile", "a/b.go")
	link := append(bytes.Repeat([]byte{1}, sha1.Size),
		0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	if l, err := parseLink(link, sha1.Size, 2); err != nil || len(l.deleted) != 1 || l.deleted[0] != 1 || len(l.replaced) != 0 {
		f.Fatalf("the seed's link reads as %+v, %v", l, err)
	}
	split = append(split[:len(split)-sha1.Size], "link"...)
	split = binary.BigEndian.AppendUint32(split, uint32(len(link)))
	split = append(split, link...)
	sum := sha1.Sum(split)
	f.Add(append(split, sum[:]...), false)
	f.Fuzz(func(t *testing.T, b []byte, sha256Len bool) {
		idLen := sha1.Size
		if sha256Len {
			idLen = sha256.Size
		}
		es, exts0, err := indexContents(b, idLen)
		if err != nil {
			return
		}
		var names []string
		for _, e := range es {
			names = append(names, e.name)
		}
		// A link extension (a split index) is merged with a shared index, here the index
		// itself: refused, or an ordinary index that reads again.
		for _, x := range exts0 {
			if x.sig != "link" {
				continue
			}
			l, err := parseLink(b[x.start+8:x.end], idLen, len(es))
			if err != nil {
				continue
			}
			if merged, err := mergeSplit(b, es, l, b, es); err == nil {
				if _, _, err := indexContents(unsplitIndex(merged, idLen), idLen); err != nil {
					t.Fatalf("the merged split index does not read: %v", err)
				}
			}
		}
		ed := indexEdit{flagged: names, zero: names, strip: true}
		nb, _, err := editedIndex(b, idLen, ed, time.Unix(1, 0))
		if err != nil {
			t.Fatalf("an index read was not rewritten: %v", err)
		}
		// Its entries in memory and its extensions read from the file (an index past
		// maxIndexBytes), it is rewritten the same.
		if len(exts0) > 0 {
			var w bytes.Buffer
			if _, err := writeEditedIndex(&w, b[:exts0[0].start], int64(len(b)), bytes.NewReader(b), idLen, ed, time.Unix(1, 0)); err != nil || !bytes.Equal(w.Bytes(), nb) {
				t.Fatalf("rewritten with its extensions read from the file, the index differs (%v)", err)
			}
		}
		again, exts, err := indexContents(nb, idLen)
		if err != nil {
			t.Fatalf("the rewritten index does not read: %v", err)
		}
		if len(again) != len(es) {
			t.Fatalf("the rewritten index has %d entries, the one read %d", len(again), len(es))
		}
		for i := range es {
			if again[i].name != es[i].name {
				t.Fatalf("entry %d: %q after the rewrite, %q before", i, again[i].name, es[i].name)
			}
		}
		for _, x := range exts {
			if !keptExtensions[x.sig] {
				t.Fatalf("extension %q left by the strip", x.sig)
			}
		}
	})
}

// FuzzBoxFiles: the other parsers of what a box wrote return, whatever the bytes.
func FuzzBoxFiles(f *testing.F) {
	f.Add([]byte("# pack-refs with: peeled fully-peeled sorted \n" +
		"1111111111111111111111111111111111111111 refs/heads/main\n" +
		"2222222222222222222222222222222222222222\trefs/replace/3333333333333333333333333333333333333333\n^4444444444444444444444444444444444444444\n"))
	f.Add([]byte("pick 0000000 x\n  x touch /tmp/p\nexec\n"))
	f.Add([]byte(`{"husky":{"hooks":{"pre-commit":"npm test"}},"scripts":{"test":"id","pretest":"x"}}`))
	f.Add([]byte("---\nname: x\nhooks:\n  PreToolUse: []\n---\n!`id`\n"))
	f.Add([]byte("pre-commit:\n  commands:\n    a:\n      run: npm run lint\n  jobs:\n    - run: ./x.sh\n"))
	f.Add([]byte("[pre-commit.commands.b]\nrun = \"python3 tools/b.py\"\n"))
	f.Add([]byte(`{"mcpServers":{"a":{"command":"sh","args":["\"$CLAUDE_PROJECT_DIR\"/x.sh"]}}} // c`))
	f.Add([]byte("notify = [\"sh\", \"x.sh\"]\n[mcp_servers.c]\ncommand = \"bash\"\n"))
	f.Add([]byte("repos:\n  - repo: local\n    hooks:\n      - id: c\n        entry: tools/c.rb\n        args: [x]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		packedReplace(b)
		withoutReplace(b, map[string]bool{})
		todoExecs(b)
		packageHooks(b, []string{"test"})
		instructionExec(b)
		// A hook manager's files in a subfolder are the box's (hookFileWords).
		managerCommands("lefthook.yml", b)
		managerCommands("lefthook.toml", b)
		managerCommands(".pre-commit-config.yaml", b)
		// So are an agent's configuration and an .envrc in a subfolder (hookFileWords).
		agentCommands(".mcp.json", b)
		agentCommands(".codex/config.toml", b)
		envrcText(b)
	})
}
