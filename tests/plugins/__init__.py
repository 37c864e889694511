"""Extensions written the way a user writes them, each in one file, imported by the tests that use them."""
