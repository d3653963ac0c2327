module github.com/muster-tool/muster

go 1.26.8

require (
	filippo.io/age v1.3.2
	filippo.io/edwards25519 v1.2.0
	github.com/BurntSushi/toml v1.6.0
	github.com/klauspost/compress v1.20.4
	github.com/olekukonko/tablewriter v0.0.5
	github.com/rogpeppe/go-internal v1.16.0
	github.com/schollz/progressbar/v3 v3.19.1
	github.com/spf13/pflag v1.1.0
	golang.org/x/crypto v0.57.0
	golang.org/x/sys v0.50.0
	golang.org/x/term v0.48.0
)

require (
	filippo.io/hpke v0.4.0 // indirect
	github.com/clipperhouse/uax29/v2 v2.7.0 // indirect
	github.com/mattn/go-runewidth v0.0.24 // indirect
	github.com/mitchellh/colorstring v0.0.0-20190213212951-d06e56a500db // indirect
	github.com/rivo/uniseg v0.4.7 // indirect
	golang.org/x/tools v0.50.0 // indirect
)
