package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Argo CD's health_test.yaml.
type healthTests struct {
	Tests []struct {
		InputPath    string `json:"inputPath"`
		HealthStatus Health `json:"healthStatus"`
	} `json:"tests"`
}

// Every kind's cases must show each of these at least once.
var required = []string{"Healthy", "Progressing", "Degraded", "Suspended"}

func luaTests(args []string) error {
	if len(args) != 1 {
		usage()
	}
	dir := args[0]
	var scripts []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "health.lua" {
			scripts = append(scripts, path)
		}
		return err
	})
	if err != nil {
		return err
	}
	if len(scripts) == 0 {
		return fmt.Errorf("no health.lua under %s", dir)
	}
	sort.Strings(scripts)
	passed, failed := 0, 0
	for _, path := range scripts {
		p, f, err := runCases(dir, path)
		if err != nil {
			return err
		}
		passed += p
		failed += f
	}
	if err := checkArgocdCM(dir); err != nil {
		fmt.Printf("FAIL %v\n", err)
		failed++
	} else {
		fmt.Printf("ok   %s is what `terdut-health argocd-cm` prints\n", argocdCMPath(dir))
		passed++
	}
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 {
		return fmt.Errorf("%d Argo CD health case(s) failed", failed)
	}
	return nil
}

// runCases runs the health_test.yaml beside one health.lua.
func runCases(root, path string) (passed, failed int, err error) {
	kindDir := filepath.Dir(path)
	name, _ := filepath.Rel(root, kindDir)
	script, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	raw, err := os.ReadFile(filepath.Join(kindDir, "health_test.yaml"))
	if err != nil {
		return 0, 0, err
	}
	var tests healthTests
	if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
		return 0, 0, fmt.Errorf("%s/health_test.yaml: %w", name, err)
	}
	seen := map[string]bool{}
	for _, tc := range tests.Tests {
		input, err := os.ReadFile(filepath.Join(kindDir, tc.InputPath))
		if err != nil {
			return 0, 0, err
		}
		obj := map[string]any{}
		if err := yaml.Unmarshal(input, &obj); err != nil {
			return 0, 0, fmt.Errorf("%s/%s: %w", name, tc.InputPath, err)
		}
		got, err := argoHealth(string(script), obj)
		seen[got.Status] = true
		switch {
		case err != nil:
			fmt.Printf("FAIL %s %s: %v\n", name, tc.InputPath, err)
			failed++
		case got != tc.HealthStatus:
			fmt.Printf("FAIL %s %s: got %s %q, want %s %q\n", name, tc.InputPath, got.Status, got.Message, tc.HealthStatus.Status, tc.HealthStatus.Message)
			failed++
		default:
			fmt.Printf("ok   %s %s: %s %q\n", name, tc.InputPath, got.Status, got.Message)
			passed++
		}
	}
	var missing []string
	for _, s := range required {
		if !seen[s] {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		fmt.Printf("FAIL %s: no case is %s\n", name, strings.Join(missing, ", "))
		failed++
	}
	return passed, failed, nil
}
