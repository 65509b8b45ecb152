// Package pgtest gives tests a PostgreSQL database of their own. BUZZ_TEST_DATABASE_URL names a
// database the tests may create schemas in (scripts/with-pg.sh starts a throwaway cluster and
// sets it). Without it the tests skip, except under CI=true, where they fail: CI never skips.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the variable naming the test database.
const EnvURL = "BUZZ_TEST_DATABASE_URL"

// URL returns a connection URL whose search_path is a new, empty schema, dropped when the test
// ends, so tests never see each other's data.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set: under CI the PostgreSQL tests must run (use scripts/with-pg.sh)", EnvURL)
		}
		t.Skipf("%s is not set; run under scripts/with-pg.sh to test against PostgreSQL", EnvURL)
	}
	b := make([]byte, 8)
	rand.Read(b)
	schema := "test_" + hex.EncodeToString(b)
	exec(t, base, `CREATE SCHEMA `+schema)
	t.Cleanup(func() { exec(t, base, `DROP SCHEMA `+schema+` CASCADE`) })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("%s: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", schema) // pgx sends unknown URL parameters as session settings
	u.RawQuery = q.Encode()
	return u.String()
}

func exec(t testing.TB, dbURL, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", EnvURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
}
