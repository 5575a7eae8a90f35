// Package field is the error a configuration section's validator returns for one invalid
// value: the key it is at and what is wrong. The brokers' validators (git relay, ssh broker)
// return it, so that internal/config places the problem at its file, line and column without
// taking the message apart.
package field

import "fmt"

// Error is one invalid configuration value.
type Error struct {
	Key string // the dotted key path as the file writes it ("git.allow[2]", "git.credentials[0].file")
	Msg string // what is wrong and, where it helps, what to write instead
}

// Errorf returns an *Error for key with a formatted message.
func Errorf(key, format string, args ...any) *Error {
	return &Error{Key: key, Msg: fmt.Sprintf(format, args...)}
}

// Error formats e as "key: message".
func (e *Error) Error() string { return e.Key + ": " + e.Msg }
