-- pgsift 0029: sift._plain_ready takes the call's knobs (issue 33): a call
-- whose knobs are only switches (true or false for a boolean knob a call may
-- set, such as {"hybrid": false} for the dense leg alone) is checked in one
-- statement too, not by the full path's knob checks and merge (~0.28 ms a
-- search on SciFact). Its former signature goes; the function file creates
-- the new one.
drop function if exists sift._plain_ready(text, @extschema:vector@.vector, integer);
