package systemd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"github.com/godbus/dbus/v5"

	"github.com/muster-tool/muster/internal/resource"
)

// enabledStates are the is-enabled answers systemctl itself counts as
// enabled (its exit status is 0 for exactly these): a static unit, pulled
// in by another, is as enabled as it can be.
var enabledStates = map[string]bool{
	"enabled": true, "enabled-runtime": true, "static": true, "indirect": true,
	"generated": true, "transient": true, "alias": true,
}

// disabledStates are the answers that mean the unit exists but is not
// enabled.
var disabledStates = map[string]bool{
	"disabled": true, "masked": true, "masked-runtime": true,
	"linked": true, "linked-runtime": true,
}

// enabled turns an is-enabled answer into a verdict, or an error naming
// the unit.
func (s *Systemd) enabled(unit, state string) (bool, error) {
	switch {
	case enabledStates[state]:
		return true, nil
	case disabledStates[state]:
		return false, nil
	}
	return false, fmt.Errorf("is unit %s enabled%s: systemd answered %q", unit, s.under(), state)
}

// Units reads the state of units: see the package doc for how.
func (s *Systemd) Units(ctx context.Context, units []string) ([]resource.UnitState, error) {
	return s.units(ctx, units, true)
}

// Look is Units that takes enablement on the running system from the
// state systemd keeps of each unit (UnitFileState, computed once after
// each reload) instead of reading the unit files again, which costs
// systemd a scan of every unit directory per unit. A link made or
// removed by hand leaves that state stale until the next reload; the
// read-back, with Units, sees the files as they are.
func (s *Systemd) Look(ctx context.Context, units []string) ([]resource.UnitState, error) {
	return s.units(ctx, units, false)
}

func (s *Systemd) units(ctx context.Context, units []string, fresh bool) ([]resource.UnitState, error) {
	for _, u := range units {
		if err := checkUnit(u); err != nil {
			return nil, err
		}
	}
	if len(units) == 0 {
		return nil, nil
	}
	if !s.CanRun() {
		return s.unitsOffline(ctx, units)
	}
	return s.unitsRunning(ctx, units, fresh)
}

// unitsOffline asks systemctl is-enabled about as many units a call as it
// answers: it stops at the first unit it does not know, whose error is
// that unit's, and the rest are asked again.
func (s *Systemd) unitsOffline(ctx context.Context, units []string) ([]resource.UnitState, error) {
	out := make([]resource.UnitState, len(units))
	for done := 0; done < len(units); {
		args := append([]string{"is-enabled"}, units[done:]...)
		stdout, err := s.systemctl(ctx, s.offline(), args...)
		if ctx.Err() != nil {
			return nil, err
		}
		lines := strings.Split(strings.TrimSpace(string(stdout)), "\n")
		if len(lines) == 1 && lines[0] == "" {
			lines = nil
		}
		if len(lines) > len(units)-done {
			return nil, fmt.Errorf("systemctl is-enabled answered %d lines for %d units", len(lines), len(units)-done)
		}
		for i, l := range lines {
			u := units[done+i]
			out[done+i].Enabled, out[done+i].Err = s.enabled(u, strings.TrimSpace(l))
		}
		done += len(lines)
		if done < len(units) {
			// The unit systemctl stopped at.
			if err == nil {
				err = errors.New("systemctl gave no answer")
			}
			out[done].Err = fmt.Errorf("is unit %s enabled%s: %w", units[done], s.under(), err)
			done++
		}
	}
	return out, nil
}

// unitsRunning reads units from the running systemd over D-Bus, every
// query of a round sent before the first answer is awaited. Enablement
// comes from the unit files on disk, as is-enabled computes it, when
// fresh; else from the state systemd keeps of each unit (see Look).
func (s *Systemd) unitsRunning(ctx context.Context, units []string, fresh bool) ([]resource.UnitState, error) {
	conn, err := s.bus(ctx)
	if err != nil {
		return nil, err
	}
	manager := conn.Object("org.freedesktop.systemd1", "/org/freedesktop/systemd1")
	const m = "org.freedesktop.systemd1.Manager."

	// Round one: the state of every unit (ListUnitsByNames loads those
	// not loaded yet), and when fresh the state of their unit files,
	// computed from the files on disk as is-enabled does, in one listing.
	list := manager.GoWithContext(ctx, m+"ListUnitsByNames", 0, nil, units)
	var files *dbus.Call
	if fresh {
		files = manager.GoWithContext(ctx, m+"ListUnitFilesByPatterns", 0, nil, []string{}, units)
	}
	var listed []struct {
		Name, Description, LoadState, ActiveState, SubState, Following string
		Path                                                           dbus.ObjectPath
		JobID                                                          uint32
		JobType                                                        string
		JobPath                                                        dbus.ObjectPath
	}
	if err := (<-list.Done).Store(&listed); err != nil {
		return nil, s.busError(err)
	}
	if len(listed) != len(units) {
		return nil, fmt.Errorf("systemd listed %d units for %d names", len(listed), len(units))
	}
	fileState := make(map[string]string, len(units))
	if fresh {
		var unitFiles []struct{ Path, State string }
		if err := (<-files.Done).Store(&unitFiles); err != nil {
			return nil, s.busError(err)
		}
		for _, f := range unitFiles {
			fileState[path.Base(f.Path)] = f.State
		}
	}

	// Round two: whether systemd runs the definition each unit's files
	// hold; when not fresh, the state systemd keeps of each unit's
	// files.
	const unitIface = "org.freedesktop.systemd1.Unit"
	stale := make([]*dbus.Call, len(units))
	kept := make([]*dbus.Call, len(units))
	for i, l := range listed {
		if l.LoadState == "not-found" {
			continue
		}
		obj := conn.Object("org.freedesktop.systemd1", l.Path)
		stale[i] = obj.GoWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, nil, unitIface, "NeedDaemonReload")
		if !fresh {
			kept[i] = obj.GoWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, nil, unitIface, "UnitFileState")
		}
	}
	out := make([]resource.UnitState, len(units))
	for i, u := range units {
		l := listed[i]
		out[i].Active = l.ActiveState == "active" || l.ActiveState == "reloading" || l.ActiveState == "refreshing"
		if stale[i] == nil {
			continue
		}
		b, err := boolProperty(stale[i], u, "NeedDaemonReload")
		if err != nil {
			return nil, err
		}
		out[i].Stale = b
		if kept[i] != nil {
			var v dbus.Variant
			if err := (<-kept[i].Done).Store(&v); err != nil {
				return nil, s.busError(err)
			}
			if st, _ := v.Value().(string); st != "" {
				fileState[u] = st
			}
		}
	}

	// Round three, rarely: the unit file state of the units neither
	// answered (instances of a template; units that do not exist, whose
	// error is systemd's).
	asked := make([]*dbus.Call, len(units))
	for i, u := range units {
		if _, ok := fileState[u]; !ok {
			asked[i] = manager.GoWithContext(ctx, m+"GetUnitFileState", 0, nil, u)
		}
	}
	for i, u := range units {
		state, ok := fileState[u]
		if !ok {
			if err := (<-asked[i].Done).Store(&state); err != nil {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("systemd: %w", ctx.Err())
				}
				out[i].Err = fmt.Errorf("is unit %s enabled: %s", u, dbusMessage(err))
				continue
			}
		}
		out[i].Enabled, out[i].Err = s.enabled(u, state)
		if out[i].Err == nil && listed[i].LoadState == "not-found" {
			out[i].Err = fmt.Errorf("unit %s: systemd finds no unit file for it", u)
		}
	}
	return out, nil
}

// boolProperty is the answer to a Properties.Get of a boolean.
func boolProperty(call *dbus.Call, unit, name string) (bool, error) {
	var v dbus.Variant
	if err := (<-call.Done).Store(&v); err != nil {
		return false, fmt.Errorf("read units from systemd: %s", dbusMessage(err))
	}
	b, ok := v.Value().(bool)
	if !ok {
		return false, fmt.Errorf("systemd answered %s of %s with %s", name, unit, v)
	}
	return b, nil
}

// bus returns the connection to systemd, opening it on first use: its
// private socket when muster runs as root (no bus daemon in between),
// else the system bus.
func (s *Systemd) bus(ctx context.Context) (*dbus.Conn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.Connected() {
		return s.conn, nil
	}
	var conn *dbus.Conn
	var err error
	if os.Geteuid() == 0 {
		conn, err = dbus.Dial("unix:path=/run/systemd/private", dbus.WithContext(ctx))
		if err == nil {
			if err = conn.Auth([]dbus.Auth{dbus.AuthExternal(strconv.Itoa(os.Geteuid()))}); err != nil {
				conn.Close()
			}
		}
	}
	if os.Geteuid() != 0 || err != nil {
		conn, err = dbus.ConnectSystemBus(dbus.WithContext(ctx))
	}
	if err != nil {
		return nil, fmt.Errorf("connect to systemd: %w", err)
	}
	s.conn = conn
	return conn, nil
}

func (s *Systemd) busError(err error) error {
	return fmt.Errorf("read units from systemd: %s", dbusMessage(err))
}

// dbusMessage is the message of a D-Bus error reply, or the error.
func dbusMessage(err error) string {
	var de dbus.Error
	if errors.As(err, &de) && len(de.Body) > 0 {
		if msg, ok := de.Body[0].(string); ok {
			return msg
		}
	}
	return err.Error()
}
