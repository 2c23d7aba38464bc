package v1api

import (
	"testing"

	"github.com/switchboard-dev/switchboard/internal/server/keyindex"
)

func TestParsePage(t *testing.T) {
	tests := []struct {
		query   string
		limit   int
		cursor  bool
		problem bool
	}{
		{"", 0, false, false},
		{"limit=1", 1, false, false},
		{"limit=1000", 1000, false, false},
		{"limit=10&other=x", 10, false, false},
		{"limit=0", 0, false, true},
		{"limit=1001", 0, false, true},
		{"limit=+5", 0, false, true},
		{"limit=%2B5", 0, false, true},
		{"limit=007", 7, false, false},
		{"limit=5.0", 0, false, true},
		{"limit=99999999999999999999", 0, false, true},
		{"limit=1&limit=1", 0, false, true},
		{"cursor=" + encodeCursorFor("conn_a", "a"), 0, true, false},
		{"cursor=" + encodeCursorFor("conn_a", "a") + "&cursor=x", 0, false, true},
		{"cursor=bm9wZQ", 0, false, true},
		{"cursor=%", 0, false, true},
		{"cursor=", 0, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			p, problem := parsePage(tt.query)
			if (problem != "") != tt.problem {
				t.Fatalf("problem = %q, want a problem: %v", problem, tt.problem)
			}
			if !tt.problem && (p.limit != tt.limit || p.hasCursor != tt.cursor) {
				t.Errorf("page = %+v, want limit %d cursor %v", p, tt.limit, tt.cursor)
			}
		})
	}
}

func TestEtagMatches(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{`"abc"`, true}, {`W/"abc"`, true}, {`"x", "abc"`, true}, {`*`, true},
		{`"abd"`, false}, {`abc`, false}, {``, false}, {`"ab`, false},
	}
	for _, tt := range tests {
		if got := etagMatches(tt.header, `"abc"`); got != tt.want {
			t.Errorf("etagMatches(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

func encodeCursorFor(id, name string) string {
	return encodeCursor(&keyindex.Conn{ID: id, Name: name})
}
