# the room's drain check runs after the QP's quiescence check, which may already have sent
# QP_RETIRED: it reads a QP the control core may have freed
/^on_send_wc(/,/^}/ {
	/^\tprefill_check_drained(c, r);$/ d
	s/^\tqpc_check_quiesced(c, q);$/\tqpc_check_quiesced(c, q);\n\tprefill_check_drained(c, r);/
}
