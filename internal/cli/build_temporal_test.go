//go:build temporal

package cli

// temporalBuild: this is aot-temporal's build (the temporal tag), for the
// scripts' [temporal] condition.
const temporalBuild = true
