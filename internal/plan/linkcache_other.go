//go:build !linux

package plan

import "os"

// linkFolder is a folder as one call of FindLinks sees it; nothing is kept between calls
// outside Linux (linkcache_linux.go).
type linkFolder struct{ path string }

func (r *linkResolver) folder(dir string) *linkFolder {
	if f, ok := r.folders[dir]; ok {
		return f
	}
	f := &linkFolder{path: dir}
	r.folders[dir] = f
	return f
}

func (r *linkResolver) close() error { return nil }

func (f *linkFolder) entries() (links, others []string) {
	d, err := os.Open(f.path)
	if err != nil {
		return nil, nil
	}
	defer d.Close()
	links, others, _ = readEntries(d)
	return links, others
}

func (f *linkFolder) at(name, p string) placeSeen {
	v, _ := lookAt(-1, name, p)
	return v
}

// lookAt is what an lstat and a readlink find at p.
func lookAt(_ int, _, p string) (placeSeen, error) {
	var v placeSeen
	fi, err := os.Lstat(p)
	if err != nil {
		return v, nil
	}
	v.exists = true
	if fi.Mode()&os.ModeSymlink != 0 {
		if t, err := os.Readlink(p); err == nil {
			v.link, v.target = true, t
		}
	}
	return v, nil
}
