// CoreDNS with only the plugins the node's Corefile uses (dvstack.node_config.corefile).
//
// CoreDNS registers each plugin from its package's init; its own main imports every
// plugin (core/plugin). Importing these few instead is CoreDNS's documented way to build
// a custom set, and it leaves out the cloud providers' SDKs the full build compiles.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/template"
)

func main() {
	coremain.Run()
}
