//go:build labfault_selfcheck

package main

const labfaultSelfCheck, labfaultCrash = true, false
