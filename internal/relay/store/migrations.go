package store

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one versioned schema change, from a file named <version>_<what>.sql.
type Migration struct {
	Version int
	Name    string // the file name, for errors
	SQL     string
}

// PendingMigrations reads fsys's migrations/*.sql newer than version current, oldest first. Both
// backends apply them the same way: each in order, recording its version in schema_migrations.
func PendingMigrations(fsys fs.FS, current int) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []Migration
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		v, err := strconv.Atoi(strings.SplitN(base, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number", base)
		}
		if v <= current {
			continue
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: v, Name: base, SQL: string(body)})
	}
	return out, nil
}
