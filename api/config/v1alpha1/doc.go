// Package v1alpha1 holds the versioned configuration files of switchboard's components,
// config.switchboard.dev/v1alpha1: ServerConfiguration (`switchboard server`),
// OperatorConfiguration (`switchboard operator`) and PanelConfiguration (`switchboard panel`),
// with their defaults (SetDefaults_*), the one home of every configurable default.
//
// Conventions, the same in every type:
//   - An absent field (a nil pointer, an empty string where the doc says so) takes its
//     default; `--print-config` shows every defaulted value.
//   - Disabled has one spelling. An address set to "" serves nothing; a bound or a period set
//     to 0 means "no bound" or "never", where the field's doc says it may be turned off, and
//     is invalid where it may not. Negative numbers are always invalid.
//   - Durations are strings Go's time.ParseDuration reads ("90s", "1h").
//   - Secrets never appear in a configuration: it names the file that holds them.
//
// Decoding (strict: an unknown field is an error naming it) and validation live in
// internal/config. A later version (v1beta1) would sit beside this package, converted to it.
package v1alpha1
