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
