// Command etcd is etcd's own server entry point, built from the module proxy for envtest
// and switchboard dev (go install cannot build etcd: its go.mod has replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
