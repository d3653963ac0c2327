//go:build labfault_crash

package main

const labfaultSelfCheck, labfaultCrash = false, true
