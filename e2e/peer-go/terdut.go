package main

// A client of terdut-server's HTTP API, the rows of docs/terdut-api.md this peer calls. One
// shared http.Transport with as many idle connections per host as reconciles may run at once
// (Go's default of 2 would serialise the passes on two connections per server).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

type apiTeam struct {
	ID         int64     `json:"id"`
	Name       string    `json:"name"`
	ExternalID string    `json:"external_id"`
	Oidc       apiGroups `json:"oidc"`
}

type apiGroups struct {
	MemberGroup *string `json:"member_group"`
	OwnerGroup  *string `json:"owner_group"`
}

type apiTarget struct {
	Kind     string  `json:"kind"`
	Username *string `json:"username,omitempty"`
}

type apiLevel struct {
	TimeoutSeconds int64       `json:"timeout_seconds"`
	Targets        []apiTarget `json:"targets"`
}

type apiLadder struct {
	RepeatCount   int32      `json:"repeat_count"`
	FallbackTopic *string    `json:"fallback_topic"`
	Levels        []apiLevel `json:"levels"`
}

type apiSwitch struct {
	ID             int64  `json:"id,omitempty"`
	Name           string `json:"name"`
	Matcher        string `json:"matcher"`
	TimeoutSeconds int64  `json:"timeout_seconds"`
	Severity       string `json:"severity"`
}

type apiIntegration struct {
	ID         int64  `json:"id"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	ExternalID string `json:"external_id"`
	URL        string `json:"url,omitempty"`
	Key        string `json:"key,omitempty"`
}

// apiError is a non-2xx answer: its status and the contract's error code.
type apiError struct {
	Status int
	Code   string
}

func (e *apiError) Error() string { return fmt.Sprintf("terdut answered %d %s", e.Status, e.Code) }

func isStatus(err error, status int) bool {
	e, ok := err.(*apiError)
	return ok && e.Status == status
}

type terdut struct {
	base string
	key  string
	http *http.Client
}

func newTransport(conns int) *http.Transport {
	return &http.Transport{
		MaxIdleConns:        conns * 4,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     10 * time.Second,
	}
}

func (c *terdut) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(data, &e)
		return resp.StatusCode, &apiError{Status: resp.StatusCode, Code: e.Error}
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decoding %s %s: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func teamPath(id int64, rest ...string) string {
	return "/api/v1/teams/" + strconv.FormatInt(id, 10) + strings.Join(rest, "")
}

// serverURL fills the URL template of the Rust operator's --server-url-template.
func serverURL(template, name, namespace, clusterDomain string, port int32) string {
	r := strings.NewReplacer("{name}", name, "{namespace}", namespace,
		"{clusterDomain}", clusterDomain, "{port}", strconv.Itoa(int(port)))
	return strings.TrimRight(r.Replace(template), "/")
}
