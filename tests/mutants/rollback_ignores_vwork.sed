# a session's rollback does not wait for the verbs worker: it destroys QPs a blocked call is
# still making
s/^\t\treturn p->vjob.busy ? -EINPROGRESS : 0;$/\t\treturn 0;/
