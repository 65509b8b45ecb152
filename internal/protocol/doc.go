// Package protocol is Buzz's shared vocabulary: event kinds, tags, NIP-10 thread references,
// channel metadata, key parsing, and NIP-42/NIP-98 signing and verification. It does no I/O.
package protocol
