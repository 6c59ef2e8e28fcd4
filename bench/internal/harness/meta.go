package harness

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/execstore/execstore/internal/tidwall/wal"
	"github.com/jackc/pgx/v5"
)

// Meta is what the report says about the run's machine and software.
type Meta struct {
	Command    string
	Started    time.Time
	Ended      time.Time
	LoadStart  string
	LoadEnd    string
	CPU        string
	Cores      int
	MemoryGiB  float64
	Kernel     string
	Filesystem string
	Go         string
	Commit     string
	Modules    []string
	SQLite     string // the C library (hand-written designs)
	SQLiteGo   string // the pure-Go port (River on SQLite)
	Postgres   string
	PGSettings string
	Cfg        Config
}

// CollectMeta reads the machine, the versions and the load average at the start.
func CollectMeta(cfg Config, plan Plan, dir string) *Meta {
	cmd := os.Getenv("BENCH_COMMAND")
	if cmd == "" {
		cmd = "go run ./cmd/execbench " + strings.Join(os.Args[1:], " ")
	}
	m := &Meta{Command: strings.TrimSpace(cmd), Started: time.Now(), LoadStart: loadavg(),
		Cores: runtime.NumCPU(), Go: runtime.Version(), Cfg: cfg}
	m.CPU = cpuModel()
	m.MemoryGiB = memGiB()
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		m.Kernel = utsString(u.Release[:])
	}
	m.Filesystem = filesystemOf(dir)
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			for _, want := range []string{"riverqueue/river", "jackc/pgx", "mattn/go-sqlite3", "modernc.org/sqlite", "tidwall/btree", "gonum.org/v1/plot"} {
				if strings.Contains(d.Path, want) {
					m.Modules = append(m.Modules, d.Path+" "+d.Version)
				}
			}
		}
	}
	m.Modules = append(m.Modules, wal.Upstream+" (as execstore's internal/tidwall/wal)")
	m.SQLite = sqliteVersion("sqlite3")
	m.SQLiteGo = sqliteVersion("sqlite")
	if plan.PostgresDSN != "" {
		m.Postgres, m.PGSettings = postgresInfo(plan.PostgresDSN)
	}
	return m
}

// Finish records the end of the run and the load average then.
func (m *Meta) Finish() {
	m.Ended = time.Now()
	m.LoadEnd = loadavg()
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}

func memGiB() float64 {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	return float64(si.Totalram) * float64(si.Unit) / (1 << 30)
}

func utsString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}

// filesystemOf finds the mount holding dir in /proc/mounts.
func filesystemOf(dir string) string {
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		return "?"
	}
	best, fs, dev := "", "?", ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if strings.HasPrefix(dir, f[1]) && len(f[1]) > len(best) {
			best, fs, dev = f[1], f[2], f[0]
		}
	}
	return fmt.Sprintf("%s (%s mounted at %s)", fs, dev, best)
}

func sqliteVersion(driver string) string {
	db, err := sql.Open(driver, ":memory:")
	if err != nil {
		return "?"
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT sqlite_version()").Scan(&v); err != nil {
		return "?"
	}
	return v
}

func postgresInfo(dsn string) (version, settings string) {
	ctx := context.Background()
	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "? (" + err.Error() + ")", ""
	}
	defer c.Close(ctx)
	_ = c.QueryRow(ctx, "SHOW server_version").Scan(&version)
	var parts []string
	for _, s := range []string{"fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "shared_buffers", "max_connections"} {
		var v string
		if err := c.QueryRow(ctx, "SHOW "+s).Scan(&v); err == nil {
			parts = append(parts, s+"="+v)
		}
	}
	return version, strings.Join(parts, ", ")
}
