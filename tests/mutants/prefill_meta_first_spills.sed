# an event put while the prefill room had no core ring sends all its later ones through the control core
s/^\t\treturn end ? KVXD_TOLD_NO : KVXD_TOLD_NOBODY;$/\t\treturn r->evq_spilled = true, KVXD_TOLD_NO;/
