<?php
// Settings that the test and benchmark scripts pass in the environment.

/** The variable's value; exits with $hint when it is missing. */
function required_env(string $name, string $hint): string {
    $value = getenv($name);
    if ($value === false || $value === '') {
        fwrite(STDERR, "$name is not set: $hint\n");
        exit(1);
    }
    return $value;
}
