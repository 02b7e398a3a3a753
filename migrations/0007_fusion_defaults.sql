-- pgsift 0007: fusion defaults chosen on two datasets. `pgsift bench fusion
-- --dataset scifact --dataset xquad-r-multi --answer-only` (SciFact train, 500
-- xquad-r-multi tuning questions): w 0.5, k 3 is the best cell at 40
-- candidates a leg on the mean of both (w 0.45, k 5 was chosen on SciFact
-- alone). Collections that set these knobs keep their values.

update sift.knob_defs set default_value = '0.5' where name = 'dense_weight';
update sift.knob_defs set default_value = '3' where name = 'rrf_k';
