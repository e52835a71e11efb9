// Package crilog writes and reads container logs in the CRI format the
// kubelet uses: one line per record, "<RFC3339Nano time> <stdout|stderr>
// <F|P> <text>", where P marks a partial line, with size-based rotation.
package crilog
