# a dial answered BYE BUSY at its AUTH is closed at once, with what the dialer sent after its AUTH
# (its QP_INFO) perhaps unread: the reset that close sends can overtake the BYE, and the dialer
# then counts a failed setup and fails its rooms
/^pending_refuse_busy(/,/^}/ s/^\tpending_settle(d, pc);$/\tpending_drop(d, pc, true);/
