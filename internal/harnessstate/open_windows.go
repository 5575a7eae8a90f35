package harnessstate

// openFlags: Windows has no O_NOFOLLOW or FIFOs; the os.Root keeps opens beneath the directory.
const openFlags = 0
