//go:build !temporal

package cli

// temporalBuild: this is aot's build without the Temporal engine, for the
// scripts' [temporal] condition.
const temporalBuild = false
