// Command etcdbin prints the path of the etcd binary the tests use
// (internal/etcdtest builds it from the Go module proxy once and caches
// it), for benchmark scripts that run etcd themselves.
package main

import (
	"fmt"
	"os"

	"skiff/internal/etcdtest"
)

func main() {
	bin, err := etcdtest.BuildBinary()
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdbin:", err)
		os.Exit(1)
	}
	fmt.Println(bin)
}
