// Package console hosts a boxed program's console on the user's terminal: the frame protocol of
// the shim socket, the attach client (raw mode, resize, signals, exit codes) and the clipboard
// escape filter applied to the program's output.
package console
