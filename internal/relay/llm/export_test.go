package llm

// CheckCredentialFile exports checkCredentialFile to the tests.
var CheckCredentialFile = checkCredentialFile
