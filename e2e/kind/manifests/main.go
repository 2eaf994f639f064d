// Prints a string constant of kind's node image build (sigs.k8s.io/kind pkg/build/nodeimage):
// the default CNI and storage manifests and the images they name, which kind writes into and
// preloads in every node image. The constants are built from other constants (the manifests
// name the images), so they are evaluated by go/types from kind's own source rather than cut
// out of it with a pattern. Used by e2e/kind/node-image.sh.
//
//	go run e2e/kind/manifests/main.go <kind module dir>/pkg/build/nodeimage <constant>
package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: main.go <nodeimage dir> <constant>")
		os.Exit(2)
	}
	dir, name := os.Args[1], os.Args[2]
	fset := token.NewFileSet()
	var files []*ast.File
	// The constants live in files of their own, which import nothing.
	for _, f := range []string{"const_cni.go", "const_storage.go", "defaults.go"} {
		file, err := parser.ParseFile(fset, filepath.Join(dir, f), nil, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		files = append(files, file)
	}
	pkg, err := (&types.Config{}).Check("nodeimage", fset, files, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	c, ok := pkg.Scope().Lookup(name).(*types.Const)
	if !ok || c.Val().Kind() != constant.String {
		fmt.Fprintf(os.Stderr, "no string constant %s in %s\n", name, dir)
		os.Exit(1)
	}
	fmt.Print(constant.StringVal(c.Val()))
}
