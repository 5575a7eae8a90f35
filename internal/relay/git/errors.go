package git

import "fmt"

// refusal is an error the transport returns when the relay, not the remote, refuses to go on
// (a redirect off its allow entry, an unusable credential); the error handler answers it in a
// form git shows.
type refusal struct {
	status int
	code   string
	msg    string
}

func (e *refusal) Error() string { return fmt.Sprintf("%s: %s", e.code, e.msg) }
