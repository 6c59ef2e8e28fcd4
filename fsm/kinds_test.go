package fsm

import (
	"reflect"
	"testing"
)

// Every kind's row fills every slot of the table: a kind added without its
// encoding, size, bound, check, apply, batch prediction or error meaning
// fails here, naming the slot. A number that is no kind has an empty row.
func TestEveryKindFillsEverySlot(t *testing.T) {
	names := map[string]Kind{}
	for k := range 256 {
		if k >= len(kinds) {
			if kindOf(Kind(k)) != nil {
				t.Fatalf("kindOf(%d) past the table is not nil", k)
			}
			continue
		}
		row := reflect.ValueOf(kinds[k])
		if kinds[k].name == "" {
			if !row.IsZero() {
				t.Errorf("kind %d has no name but fills some slot of its row", k)
			}
			continue
		}
		for i := range row.NumField() {
			if row.Field(i).IsZero() {
				t.Errorf("kind %d (%s) leaves its slot %q empty", k, kinds[k].name, row.Type().Field(i).Name)
			}
		}
		if kinds[k].since > CodecVersion {
			t.Errorf("kind %s appears in codec version %d, after the current %d", kinds[k].name, kinds[k].since, CodecVersion)
		}
		if other, ok := names[kinds[k].name]; ok {
			t.Errorf("kinds %d and %d are both named %q", other, k, kinds[k].name)
		}
		names[kinds[k].name] = Kind(k)
		if Kind(k).String() != kinds[k].name {
			t.Errorf("Kind(%d).String() = %q, want %q", k, Kind(k), kinds[k].name)
		}
	}
	if got := len(Kinds()); got != len(names) {
		t.Errorf("Kinds() lists %d kinds, the table has %d", got, len(names))
	}
}

// The bound of every kind holds for a command of it at its largest, and a
// change in any size the limits give moves the bound of the kinds that hold
// such a value: a bound that ignored one would miss the commands it allows.
func TestEveryKindsBoundFollowsTheSizesItHolds(t *testing.T) {
	base := Bounds{ID: 200, Event: 1000, ContextEntries: 10, Value: 1000, Key: 100, WritesPerCommit: 10,
		Commit: 1000, KeysPerWatch: 4, ErrorMessage: 100, ErrorCauseDepth: 3, CancelReason: 100}
	grows := map[Kind][]string{
		KindAdmit:          {"ID", "Event", "ContextEntries"},
		KindWake:           {"ID"},
		KindRenew:          {"ID"},
		KindRelease:        {"ID", "ErrorMessage", "ErrorCauseDepth"},
		KindAcknowledge:    {"ID", "Value"},
		KindSaveStep:       {"ID", "Key", "Value"},
		KindStart:          {"ID", "Key", "Event"},
		KindCommit:         {"WritesPerCommit", "Commit"},
		KindWatch:          {"ID", "KeysPerWatch", "Key"},
		KindCancel:         {"ID", "CancelReason"},
		KindPutSchedule:    {"ID", "Event"},
		KindDeleteSchedule: {"ID"},
		KindFireSchedules:  {"ID"},
		KindForget:         {"ID"},
	}
	for _, k := range Kinds() {
		for _, field := range grows[k] {
			more := base
			f := reflect.ValueOf(&more).Elem().FieldByName(field)
			f.SetInt(f.Int() + 100_000)
			if CommandBound(&more, k) <= CommandBound(&base, k) {
				t.Errorf("%s: the bound does not grow with Bounds.%s", k, field)
			}
		}
	}
}
