package idmap

// SetAccountFiles makes Take read files instead of the host's account databases until restore
// is called.
func SetAccountFiles(files []string) (restore func()) {
	old := accountFiles
	accountFiles = files
	return func() { accountFiles = old }
}

// CheckAccounts is checkAccounts over the files SetAccountFiles set.
func CheckAccounts() error { return checkAccounts(accountFiles) }

// UseStatusIDs makes Take read every process's ids from /proc/PID/status, as on a kernel
// without PIDFD_GET_INFO, until restore is called.
func UseStatusIDs() (restore func()) {
	old := processIDs
	processIDs = statusIDs
	return func() { processIDs = old }
}

// ProcessIDs returns the real, effective, saved and filesystem uids, then gids, of pid as
// PIDFD_GET_INFO and /proc/PID/status give them.
func ProcessIDs(pid int) (pidfd, status [8]uint32, err error) {
	if pidfd, err = pidfdIDs(pid); err != nil {
		return
	}
	status, err = statusIDs(pid)
	return
}

// SetNSS makes Take read nsswitch as its nsswitch.conf and look for getent at getent (nil
// keeps the host's) until restore is called.
func SetNSS(nsswitch string, getent []string) (restore func()) {
	oldFile, oldPaths := nsswitchFile, getentPaths
	nsswitchFile = nsswitch
	if getent != nil {
		getentPaths = getent
	}
	return func() { nsswitchFile, getentPaths = oldFile, oldPaths }
}

// OtherSources is otherSources.
func OtherSources(nsswitch string) (map[string][]string, error) { return otherSources(nsswitch) }
