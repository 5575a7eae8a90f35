package integrity

// SurelyNoRepository is surelyNoRepository, for the tests of package integrity_test.
var SurelyNoRepository = surelyNoRepository
