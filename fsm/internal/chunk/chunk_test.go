package chunk

import (
	"testing"
	"unsafe"

	"github.com/execstore/execstore/fsm/internal/record"
)

func rec(no uint64, st record.Status) *record.Stored {
	return record.New(&record.Execution{ID: "e", Status: st, AdmitNo: no, ChangeSeq: no}, 1)
}

// refuses reports whether write panics.
func refuses(write func()) (panicked bool) {
	defer func() { panicked = recover() != nil }()
	write()
	return false
}

// Writable hands the state that made a chunk that chunk, and any other state
// a copy in its place; a write through the copy leaves the table a copy of
// the state shares as it was.
func TestWritableCopiesAChunkOfAnotherGeneration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gen     uint32
		inPlace bool
	}{
		{"its own generation", 3, true},
		{"another generation", 5, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tbl Table
			c := tbl.Writable(1, 10, 3)
			c.Put(1, rec(1, record.StatusAdmitted), record.StatusAdmitted, 3)
			shared := tbl // what a copy of the state holds

			got := tbl.Writable(1, 0, tc.gen)
			if (got == c) != tc.inPlace {
				t.Fatalf("in place: %v, want %v", got == c, tc.inPlace)
			}
			got.Put(1, rec(1, record.StatusCompleted), record.StatusCompleted, tc.gen)
			got.Put(2, rec(2, record.StatusAdmitted), record.StatusAdmitted, tc.gen)
			if tbl.StatusOf(1) != record.StatusCompleted || tbl.Get(2) == nil {
				t.Fatalf("the writer's table: status %v, record 2 %v", tbl.StatusOf(1), tbl.Get(2))
			}
			wantShared := record.StatusAdmitted
			if tc.inPlace {
				wantShared = record.StatusCompleted // one generation: nothing is shared
			}
			if st := shared.StatusOf(1); st != wantShared {
				t.Fatalf("the shared table's slot 1 is %v, want %v", st, wantShared)
			}
			if !tc.inPlace && (shared.Get(2) != nil || shared.Chunk(0).Live() != 1 || shared.Chunk(0).Counts()[record.StatusAdmitted] != 1) {
				t.Fatal("a write through the copy changed the shared chunk")
			}
		})
	}
}

// Every write of a chunk refuses a generation other than the chunk's, and
// leaves the chunk as it was.
func TestWritesRefuseAChunkOfAnotherGeneration(t *testing.T) {
	var tbl Table
	slots := tbl.Writable(1, 10, 3)
	slots.Put(1, rec(1, record.StatusAdmitted), record.StatusAdmitted, 3)
	post := NewPostings(0, 3)
	post.Add(1, 3)
	feed := NewFeed(1, 4, 3)
	feed.Append(Entry{Seq: 1, No: 1, At: 10}, 3)
	for _, tc := range []struct {
		name  string
		write func(gen uint32)
		same  func() bool
	}{
		{"a slot", func(gen uint32) { slots.Put(1, nil, 0, gen) }, func() bool { return slots.Live() == 1 && slots.Status(1) == record.StatusAdmitted }},
		{"a postings number", func(gen uint32) { post.Add(2, gen) }, func() bool { return post.Live() == 1 && post.Run(0).Len() == 1 }},
		{"a postings removal", func(gen uint32) { post.Remove(1, &tbl, gen) }, func() bool { return post.Live() == 1 && post.Run(0).Live() == 1 }},
		{"a postings count", func(gen uint32) { post.CountRecord(gen) }, func() bool { return post.Total() == 0 }},
		{"a change", func(gen uint32) { feed.Append(Entry{Seq: 2, No: 1, At: 11}, gen) }, func() bool { return feed.Len() == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, gen := range []uint32{2, 4, 5} {
				if !refuses(func() { tc.write(gen) }) {
					t.Fatalf("a write of generation %d to a chunk of generation 3 was not refused", gen)
				}
				if !tc.same() {
					t.Fatalf("a refused write of generation %d changed the chunk", gen)
				}
			}
		})
	}
}

// Own hands the state that made a postings list or a change log chunk that
// list or chunk, and any other state a copy; writes through the copy leave
// the original as a copy of the state sees it.
func TestOwnCopiesWhatAnotherGenerationMade(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gen     uint32
		inPlace bool
	}{
		{"its own generation", 3, true},
		{"another generation", 5, false},
	} {
		t.Run(tc.name+", postings", func(t *testing.T) {
			var tbl Table
			for no := uint64(1); no <= 3; no++ {
				tbl.Writable(no, 10, 3).Put(no, rec(no, record.StatusAdmitted), record.StatusAdmitted, 3)
			}
			p := NewPostings(2, 3)
			p.Add(1, 3)
			p.Add(2, 3)
			got := p.Own(tc.gen)
			if (got == p) != tc.inPlace {
				t.Fatalf("in place: %v, want %v", got == p, tc.inPlace)
			}
			got.CountRecord(tc.gen)
			got.Add(3, tc.gen)
			tbl.Writable(1, 0, 3).Put(1, nil, 0, 3)
			got.Remove(1, &tbl, tc.gen)
			if got.Total() != 3 || got.Live() != 2 || got.Run(0).Len() != 3 || got.Run(0).Live() != 2 {
				t.Fatalf("the writer's list: total %d, live %d, run %d/%d", got.Total(), got.Live(), got.Run(0).Live(), got.Run(0).Len())
			}
			if !tc.inPlace && (p.Total() != 2 || p.Live() != 2 || p.Run(0).Len() != 2 || p.Run(0).Live() != 2) {
				t.Fatalf("the shared list changed: total %d, live %d, run %d/%d", p.Total(), p.Live(), p.Run(0).Live(), p.Run(0).Len())
			}
		})
		t.Run(tc.name+", change log", func(t *testing.T) {
			c := NewFeed(1, 4, 3)
			c.Append(Entry{Seq: 1, No: 1, At: 10}, 3)
			got := c.Own(tc.gen)
			if (got == c) != tc.inPlace {
				t.Fatalf("in place: %v, want %v", got == c, tc.inPlace)
			}
			got.Append(Entry{Seq: 2, No: 1, At: 11}, tc.gen)
			if got.Lo() != 1 || got.Len() != 2 || got.Entry(1).Seq != 2 {
				t.Fatalf("the writer's chunk: from %d, %d entries", got.Lo(), got.Len())
			}
			if !tc.inPlace && (c.Len() != 1 || c.Entry(0) != (Entry{Seq: 1, No: 1, At: 10})) {
				t.Fatalf("the shared chunk changed: %d entries", c.Len())
			}
		})
	}
}

// Put reports each count by status that leaves or reaches 0, and the count
// of records (bit 0), so that the state's trees of chunks by status follow.
func TestPutReportsTheCountsThatLeaveOrReachZero(t *testing.T) {
	const a, s, c = record.StatusAdmitted, record.StatusSuspended, record.StatusCompleted
	var tbl Table
	ch := tbl.Writable(1, 10, 1)
	for _, tc := range []struct {
		name    string
		j       uint64
		st      record.Status
		in, out uint8
	}{
		{"the first record", 1, a, 1<<a | 1, 0},
		{"a second of the status", 2, a, 0, 0},
		{"a change of status", 1, s, 1 << s, 0},
		{"the same status again", 1, s, 0, 0},
		{"the last of a status changes", 2, c, 1 << c, 1 << a},
		{"one emptied", 1, 0, 0, 1 << s},
		{"the last emptied", 2, 0, 0, 1<<c | 1},
	} {
		var e *record.Stored
		if tc.st != 0 {
			e = rec(tc.j, tc.st)
		}
		in, out := ch.Put(tc.j, e, tc.st, 1)
		if in != tc.in || out != tc.out {
			t.Fatalf("%s: in %08b out %08b, want %08b %08b", tc.name, in, out, tc.in, tc.out)
		}
	}
	if ch.Live() != 0 || ch.Counts() != [StatusCap]uint16{} {
		t.Fatalf("an emptied chunk counts %d records, %v by status", ch.Live(), ch.Counts())
	}
}

// The admission table's chunk is the layout it had before it was a type:
// 256 record pointers, 256 status bytes, the counts and the generation, and
// nothing more (a table of a million records holds about 4,000 of them).
// Runs and change log chunks are a slice header, a count or a bound, and
// the generation.
func TestChunksKeepTheirLayout(t *testing.T) {
	for _, tc := range []struct {
		name      string
		got, want uintptr
	}{
		{"Slots", unsafe.Sizeof(Slots{}), SlotsSize*8 + SlotsSize + StatusCap*2 + 2 + 2 + 4},
		{"Run", unsafe.Sizeof(Run{}), 24 + 8 + 8},
		{"Feed", unsafe.Sizeof(Feed{}), 8 + 24 + 8},
		{"Postings", unsafe.Sizeof(Postings{}), 24 + 8 + 8 + 8},
		{"Entry", unsafe.Sizeof(Entry{}), 24},
	} {
		if tc.got != tc.want {
			t.Errorf("%s is %d bytes, want %d", tc.name, tc.got, tc.want)
		}
	}
}

// A postings list rewrites a run before it is more dead than live, so it
// holds at most twice its live numbers; Check reports a run that was left
// holding more dead numbers than live ones.
func TestARunIsRewrittenBeforeItIsMoreDeadThanLive(t *testing.T) {
	var tbl Table
	p := NewPostings(0, 1)
	for no := uint64(1); no <= 8; no++ {
		tbl.Writable(no, 10, 1).Put(no, rec(no, record.StatusAdmitted), record.StatusAdmitted, 1)
		p.CountRecord(1)
		p.Add(no, 1)
	}
	all := func(*record.Stored) bool { return true }
	for no := uint64(1); no <= 7; no++ {
		tbl.Writable(no, 0, 1).Put(no, nil, 0, 1)
		p.Remove(no, &tbl, 1)
		if msg := p.Check(&tbl, all); msg != "" {
			t.Fatalf("after removing 1..%d: %s", no, msg)
		}
		if r := p.Run(0); 2*r.Live() < r.Len() {
			t.Fatalf("after removing 1..%d: a run of %d numbers, %d live", no, r.Len(), r.Live())
		}
	}
	// A run whose dead numbers were left in place.
	tbl.Writable(8, 0, 1).Put(8, nil, 0, 1)
	stale := &Postings{runs: []*Run{{nos: []uint64{1, 2, 3, 8, 9}, live: 1, gen: 1}}, live: 1, total: 9, gen: 1}
	tbl.Writable(9, 10, 1).Put(9, rec(9, record.StatusAdmitted), record.StatusAdmitted, 1)
	if msg := stale.Check(&tbl, all); msg == "" {
		t.Fatal("Check passed a run of 5 numbers with 1 live")
	}
}
